package config

import "log/slog"

// Secret prints as [redacted] through fmt, slog and JSON, so a config logged by accident leaks nothing.
type Secret string

const redacted = "[redacted]"

func (s Secret) Reveal() string               { return string(s) }
func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
