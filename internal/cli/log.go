package cli

import (
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// logFlags are --log-format and --log-level, of the commands that log.
type logFlags struct {
	format, level string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
	withEnv(fs, "log-format", "log-level")
}

// logger is the logger the flags ask for, writing to w. Durations are
// written as Go duration strings ("1.5s"), in JSON too.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: use text or json", l.format)
}

// durationText writes a duration attribute as its String ("1.5s"), which
// JSON would otherwise write as nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
