package kubernetes

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/klog/v2"
)

var klogOnce sync.Once

// quietKlog sends client-go's own log lines (klog: streams that end when a
// run is over, retries) to log at debug level instead of standard error.
// klog is process-wide: the first backend's logger is used.
func quietKlog(log *slog.Logger) {
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(debugHandler{log.Handler()})) })
}

// debugHandler logs every record at debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if !d.h.Enabled(ctx, slog.LevelDebug) {
		return nil // logr passes errors on without asking Enabled
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(a []slog.Attr) slog.Handler { return debugHandler{d.h.WithAttrs(a)} }

func (d debugHandler) WithGroup(n string) slog.Handler { return debugHandler{d.h.WithGroup(n)} }
