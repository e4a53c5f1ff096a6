package edge

import (
	"io"
	"log/slog"
	"os"
)

// NewLogger returns the edge's logger: text for a human on a terminal, JSON
// otherwise (or as cfg.Format says).
func NewLogger(w io.Writer, cfg LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.Format
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
