// Package devstack starts captchaflow's local stack (the Temporal server on SQLite with its Web UI, provider
// simulator, worker, ingress) as real processes, for `make run` and for the end-to-end tests. Every process it
// starts runs in its own process group and is stopped by the caller (t.Cleanup, a signal handler), so nothing is
// left running; on Linux the kernel also kills them if the caller dies first.
//
// A chaos test, for example:
//
//	ingressPort, _ := devstack.FreePort()
//	proxy := startProxy(t, "127.0.0.1:"+strconv.Itoa(ingressPort)) // a proxy in front of the ingress
//	stack, err := devstack.Start(ctx, devstack.Options{
//		RunDir:           t.TempDir(),
//		TemporalHeadless: true,
//		IngressPort:      ingressPort,
//		CallbackBaseURL:  proxy.URL,                                          // pingbacks go through the proxy
//		IngressEnv:       map[string]string{"INGRESS_SIGNAL_TIMEOUT": "2s"}, // per-process overrides
//	})
//	require.NoError(t, err)
//	t.Cleanup(func() { _ = stack.Stop() })
//
//	stack.Worker().Kill()                          // crash the worker (SIGKILL to its process group)
//	require.NoError(t, stack.StartWorker(ctx))     // and bring it back, waiting for /healthz
//	require.NoError(t, stack.Temporal.Stop())      // stop Temporal...
//	require.NoError(t, stack.Temporal.Restart(ctx)) // ...and restart it on the same SQLite file and ports
//
// Logs are in RunDir, one file per process (restarts append, after a marker line); readiness errors quote
// their last lines.
package devstack
