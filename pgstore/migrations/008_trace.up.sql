-- durable 008: the W3C traceparent of the span that triggered a run (see
-- docs/design.md, "Metrics and traces"), read by claims for the spans of
-- its steps; NULL for runs triggered without one (most).
ALTER TABLE {{schema}}.runs ADD COLUMN trace_parent text;
