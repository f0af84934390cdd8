package durable

import "fmt"

// Payload limits: see Config.MaxInputSize, MaxOutputSize and MaxEventSize,
// and docs/semantics.md, "Limits".

// overLimit returns an error matching ErrPayloadTooLarge when n bytes of
// what are over limit (negative: no limit), which Config.field sets.
func overLimit(what string, n, limit int, field string) error {
	if limit < 0 || n <= limit {
		return nil
	}
	return fmt.Errorf("%w: %s is %d bytes, over the limit of %d (Config.%s)", ErrPayloadTooLarge, what, n, limit, field)
}

// checkInput checks the size of an encoded input.
func (e *Engine) checkInput(what string, b []byte) error {
	return overLimit(what, len(b), e.cfg.MaxInputSize, "MaxInputSize")
}

// checkOutput checks the size of an encoded output.
func (e *Engine) checkOutput(what string, b []byte) error {
	return overLimit(what, len(b), e.cfg.MaxOutputSize, "MaxOutputSize")
}

// checkEvent checks the size of an encoded event or signal payload.
func (e *Engine) checkEvent(what string, b []byte) error {
	return overLimit(what, len(b), e.cfg.MaxEventSize, "MaxEventSize")
}
