package config

import "log/slog"

// Secret holds a credential. It prints as [redacted] through fmt, slog and JSON, so logging a config struct by
// accident cannot leak it; Reveal is the one way to read it.
type Secret string

const redacted = "[redacted]"

func (s Secret) Reveal() string               { return string(s) }
func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
