package dag

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxTextLen is the most bytes of a text the engine records: a step's
// error, a skip or cancel reason, an event's detail.
const MaxTextLen = 8 << 10

// truncated ends a text cut at MaxTextLen.
const truncated = "… (truncated)"

// Text returns s as the engine records it: valid UTF-8 (each invalid byte
// and each NUL, which PostgreSQL's text type refuses, becomes U+FFFD) of at
// most MaxTextLen bytes, cut on a character boundary and marked when cut.
// Both stores record exactly this, so they agree byte for byte.
func Text(s string) string {
	if len(s) <= MaxTextLen && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= MaxTextLen {
		return s
	}
	return cut(s, MaxTextLen-len(truncated)) + truncated
}

// cut returns the longest prefix of the valid UTF-8 s that has at most n
// bytes and ends on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxQuoted is the most bytes of a caller's string that an error message
// quotes.
const maxQuoted = 64

// Quote returns s quoted for an error message (as %q does), cut to its
// first 64 bytes with "..." when longer, so that a huge or hostile value
// (a 10 KB tenant ID, say) is never echoed whole.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut(strings.ToValidUTF8(s[:min(len(s), maxQuoted+utf8.UTFMax)], "\uFFFD"), maxQuoted)) +
		"... (" + strconv.Itoa(len(s)) + " bytes)"
}
