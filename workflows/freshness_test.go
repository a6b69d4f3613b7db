package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/stretchr/testify/mock"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// delivered is one Deliver call as the mock saw it: the body's task and result, and the (test) time of the call.
type delivered struct {
	at      time.Time
	res     captchaflow.Result
	refresh int // DeliverRequest.Refresh: which token of the task, for its webhook-id
}

// deliverFailingFor makes notify_url refuse every delivery of a code in refuse and accept any other, recording
// each call.
func (s *SolveCaptchaSuite) deliverFailingFor(refuse ...string) *[]delivered {
	var mu sync.Mutex
	calls := &[]delivered{}
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.DeliverRequest) error {
		var n notification
		s.Require().NoError(json.Unmarshal(req.Body, &n))
		mu.Lock()
		*calls = append(*calls, delivered{at: s.env.Now(), res: n.Result, refresh: req.Refresh})
		mu.Unlock()
		for _, code := range refuse {
			if n.Code == code {
				return temporal.NewApplicationError("notify_url answered 503", activities.FailureDeliveryRejected)
			}
		}
		return nil
	})
	return calls
}

// neverExpired checks that no Deliver call carried a token past its expires_at.
func (s *SolveCaptchaSuite) neverExpired(calls []delivered) {
	s.NotEmpty(calls)
	for _, c := range calls {
		s.False(c.res.ExpiresAt.IsZero(), "the body carries expires_at")
		s.True(c.at.Before(c.res.ExpiresAt), "delivery of %s at %s, after it expired at %s", c.res.Code, c.at, c.res.ExpiresAt)
	}
}

func withNotify(in captchaflow.Input) captchaflow.Input {
	in.NotifyURL = "https://downstream.example/hook"
	return in
}

func (s *SolveCaptchaSuite) tokenExpiredDetails() captchaflow.Result {
	s.Equal(captchaflow.FailureTokenExpired, s.failureType())
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(s.env.GetWorkflowError(), &appErr))
	var last captchaflow.Result
	s.Require().NoError(appErr.Details(&last))
	return last
}

func (s *SolveCaptchaSuite) TestExpiresAtPerMethodAndOverride() {
	for _, tc := range []struct {
		method string
		params captchaflow.Params
		ttl    int
		want   time.Duration
	}{
		{"userrecaptcha", captchaflow.Params{"googlekey": "k", "pageurl": "https://e.com"}, 0, 120 * time.Second},
		{"hcaptcha", captchaflow.Params{"sitekey": "k", "pageurl": "https://e.com"}, 0, 120 * time.Second},
		{"turnstile", captchaflow.Params{"sitekey": "k", "pageurl": "https://e.com"}, 0, 300 * time.Second},
		{"base64", captchaflow.Params{"body": "aGk="}, 0, 0},
		{"textcaptcha", captchaflow.Params{"textcaptcha": "2+2?"}, 0, 0},
		{"turnstile", captchaflow.Params{"sitekey": "k", "pageurl": "https://e.com"}, 45, 45 * time.Second},
		{"base64", captchaflow.Params{"body": "aGk="}, 600, 600 * time.Second},
	} {
		env := s.NewTestWorkflowEnvironment()
		Register(env, &activities.Activities{}, Settings{})
		env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "C", Authenticated: true, RunID: testRunID, Submission: 1})
		}, 7*time.Second)
		env.ExecuteWorkflow(SolveCaptcha, captchaflow.Input{Method: tc.method, Params: tc.params, TokenTTLSeconds: tc.ttl})
		s.Require().NoError(env.GetWorkflowError(), tc.method)
		var r captchaflow.Result
		s.Require().NoError(env.GetWorkflowResult(&r))
		if tc.want == 0 {
			s.True(r.ExpiresAt.IsZero(), "%s: no expiry, got %s", tc.method, r.ExpiresAt)
			js, _ := json.Marshal(r)
			s.NotContains(string(js), "expires_at", "a code that does not expire has no expires_at")
			continue
		}
		s.Equal(tc.want, r.ExpiresAt.Sub(r.ReceivedAt), "%s ttl=%d", tc.method, tc.ttl)
	}
}

// TestRefreshDeliversFreshToken: notify_url refuses the first token until it expires; the workflow solves again
// and delivers the second. No delivery ever carries a dead token, and the status query shows the token's times.
func (s *SolveCaptchaSuite) TestRefreshDeliversFreshToken() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Once()
	calls := s.deliverFailingFor("CODE-111")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	var during captchaflow.Status
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(captchaflow.StatusQuery)
		s.Require().NoError(err)
		s.Require().NoError(v.Get(&during))
	}, 60*time.Second)
	// The refresh submits as the first token expires (~2 min); its callback comes 10 s later.
	s.signalAt(140*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))

	r := s.result()
	s.Equal("CODE-222", r.Code)
	s.Equal("222", r.ProviderTaskID)
	s.Equal(1, r.Refreshes)
	s.Equal(2, r.Submits)
	s.Equal(120*time.Second, r.ExpiresAt.Sub(r.ReceivedAt))
	s.neverExpired(*calls)
	last := (*calls)[len(*calls)-1]
	s.Equal("CODE-222", last.res.Code, "the fresh token was delivered")
	s.Equal(1, last.refresh, "the fresh token is a new result: a new webhook-id")
	s.Greater(len(*calls), 5, "the first token was retried until close to its expiry")
	for _, c := range (*calls)[:len(*calls)-1] {
		s.Equal("CODE-111", c.res.Code)
		s.Equal(0, c.refresh, "retries of one delivery keep its webhook-id")
	}
	s.Equal(captchaflow.PhaseDelivering, during.Phase)
	s.False(during.ReceivedAt.IsZero())
	s.Equal(120*time.Second, during.ExpiresAt.Sub(during.ReceivedAt))
}

// TestRefreshIsASpanOfItsRun: with the tracing interceptor, the refresh round is a span under the run's, from the
// decision to solve again to the fresh result.
func (s *SolveCaptchaSuite) TestRefreshIsASpanOfItsRun() {
	rec := tracetest.NewSpanRecorder()
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")})
	s.Require().NoError(err)
	s.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{tracing}})
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Once()
	s.deliverFailingFor("CODE-111")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(140*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	s.Equal("CODE-222", s.result().Code)

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()] = sp
	}
	run, round := spans["RunWorkflow:"+captchaflow.WorkflowType], spans["refresh 1"]
	s.Require().NotNil(run, "spans: %v", spans)
	s.Require().NotNil(round, "spans: %v", spans)
	s.Equal(run.SpanContext().SpanID(), round.Parent().SpanID())
	s.Equal(run.SpanContext().TraceID(), round.SpanContext().TraceID())
	s.Contains(round.Attributes(), attribute.Int("captchaflow.refresh", 1))
	s.Greater(round.EndTime().Sub(round.StartTime()), 10*time.Second, "the round lasts until the fresh token came")
}

// TestRefreshesExhaustedFailTokenExpired: the fresh token meets the same dead receiver; with max_refreshes=1 the
// task fails TokenExpired carrying the last (refreshed) result.
func (s *SolveCaptchaSuite) TestRefreshesExhaustedFailTokenExpired() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Once()
	calls := s.deliverFailingFor("CODE-111", "CODE-222")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(140*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))

	last := s.tokenExpiredDetails()
	s.Equal("CODE-222", last.Code)
	s.Equal(1, last.Refreshes)
	s.Equal(2, last.Submits)
	s.neverExpired(*calls)
	s.Contains(s.env.GetWorkflowError().Error(), "max_refreshes=1")
}

// TestMaxRefreshesZeroFailsAtExpiry: refreshing turned off, the task fails TokenExpired when the first token
// expires, without another submission.
func (s *SolveCaptchaSuite) TestMaxRefreshesZeroFailsAtExpiry() {
	s.expectSubmit("111")
	calls := s.deliverFailingFor("CODE-111")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	in := withNotify(recaptcha())
	zero := 0
	in.MaxRefreshes = &zero
	in.TokenTTLSeconds = 30
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	last := s.tokenExpiredDetails()
	s.Equal("CODE-111", last.Code)
	s.Zero(last.Refreshes)
	s.Equal(30*time.Second, last.ExpiresAt.Sub(last.ReceivedAt))
	s.neverExpired(*calls)
	s.Contains(s.env.GetWorkflowError().Error(), "max_refreshes=0")
}

// TestRefusedNotifyURLIsNotRefreshed: a notify_url refused for good fails DeliveryFailed at once; a fresh token
// would not change that, so none is paid for.
func (s *SolveCaptchaSuite) TestRefusedNotifyURLIsNotRefreshed() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(
		temporal.NewNonRetryableApplicationError("notify_url refused: private address", activities.FailureDeliveryForbidden, nil)).Once()
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	s.Equal(captchaflow.FailureDeliveryFailed, s.failureType())
}

// TestDeliveredTokenIsNotRefreshed: a receiver that comes back before expiry gets the first token; nothing is
// solved again.
func (s *SolveCaptchaSuite) TestDeliveredBeforeExpiryIsNotRefreshed() {
	s.expectSubmit("111")
	n := 0
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(func(_ context.Context, _ activities.DeliverRequest) error {
		if n++; n < 4 {
			return temporal.NewApplicationError("notify_url answered 502", activities.FailureDeliveryRejected)
		}
		return nil
	})
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	r := s.result()
	s.Equal("CODE-111", r.Code)
	s.Zero(r.Refreshes)
	s.Equal(1, r.Submits)
}

// TestCallbackTimeoutByMethod: the worker's per-method default applies to a task that leaves
// callback_timeout_seconds unset, and an explicit value wins.
func (s *SolveCaptchaSuite) TestCallbackTimeoutByMethod() {
	for _, tc := range []struct {
		set  int
		want time.Duration
	}{{0, 30 * time.Second}, {50, 50 * time.Second}} {
		env := s.NewTestWorkflowEnvironment()
		Register(env, &activities.Activities{}, Settings{})
		// The worker's Submit hands back its per-method default (CALLBACK_TIMEOUT_BY_METHOD=userrecaptcha=30s).
		env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
			activities.SubmitResult{ProviderTaskID: "111", CallbackTimeoutSeconds: 30}, nil).Once()
		env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{Code: "POLLED"}, nil).Once()
		in := recaptcha()
		in.CallbackTimeoutSeconds = tc.set
		env.ExecuteWorkflow(captchaflow.WorkflowType, in)
		s.Require().NoError(env.GetWorkflowError())
		var r captchaflow.Result
		s.Require().NoError(env.GetWorkflowResult(&r))
		s.Equal(captchaflow.ViaPoll, r.Via)
		s.Equal(tc.want, r.ReceivedAt.Sub(r.SubmittedAt), "set=%d", tc.set)
	}
	// Without a configured default for the method, the contract's 120 s stands.
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{Code: "POLLED"}, nil).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal(120*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
}
