package activities

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// fakeProvider records what the activities ask of the provider.
type fakeProvider struct {
	providers.Client                  // Balance and Report: balance_test.go and report_test.go set their own
	flavor           providers.Flavor // a createTask provider's: Supports is its table's
	mu               sync.Mutex
	pingbacks        []string
	submitErr        error
	getCode          string
	getErr           error
	gets             int
	submittedAt      time.Time // when the last Submit reached the provider
}

func (f *fakeProvider) Supports(method string, params map[string]string) error {
	if f.flavor == "" {
		return nil
	}
	return providers.Supports(f.flavor, method, params)
}

func (f *fakeProvider) Submit(_ context.Context, _ string, _ map[string]string, pingback string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pingbacks, f.submittedAt = append(f.pingbacks, pingback), time.Now()
	if f.submitErr != nil {
		return "", "", f.submitErr
	}
	return "7300000001", "", nil
}

func (f *fakeProvider) Get(context.Context, string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	return f.getCode, f.getErr
}

type ActivitiesSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env      *testsuite.TestActivityEnvironment
	provider *fakeProvider
	acts     *Activities
}

func TestActivities(t *testing.T) { suite.Run(t, new(ActivitiesSuite)) }

func (s *ActivitiesSuite) SetupTest() {
	s.env = s.NewTestActivityEnvironment()
	s.provider = &fakeProvider{getCode: "CODE"}
	s.acts = &Activities{
		Provider:        s.provider,
		CallbackBaseURL: "https://cb.example.com/hooks",
		CallbackSecret:  "callback-secret-value",
		NotifySecret:    "notify-secret-value",
		DeliveryTimeout: 2 * time.Second,
		// The receivers below are httptest servers on 127.0.0.1; the tests of the default (public targets only)
		// turn this off again.
		NotifyAllowPrivate: true,
	}
	s.env.RegisterActivity(s.acts)
}

func (s *ActivitiesSuite) TestSubmitGivesProviderTheTokenedCallbackURL() {
	v, err := s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"a": "b"}, RunID: "run-1", Submission: 1})
	s.Require().NoError(err)
	var res SubmitResult
	s.Require().NoError(v.Get(&res))
	s.Equal("7300000001", res.ProviderTaskID)

	s.Require().Len(s.provider.pingbacks, 1)
	u, err := url.Parse(s.provider.pingbacks[0])
	s.Require().NoError(err)
	s.Equal("/hooks/callback/default-test-workflow-id", u.Path)
	s.True(callbackauth.ValidFor(u.Query().Get("t"), "default-test-workflow-id",
		callbackauth.Submission{RunID: u.Query().Get("r"), N: 1}, "callback-secret-value"))
}

// A Submit its worker's lane admitted takes the lane's room as it goes: with none (spent, or the lane shut since the
// workflow looked), it sends nothing and comes back non-retryable, for the workflow to submit it again on the queue.
func (s *ActivitiesSuite) TestALaneSubmitWithNoRoomSendsNothing() {
	f := newFakeServer()
	f.pollers = map[string][]string{queueA: {"w"}}
	s.acts.Pace = &Pacer{Service: f, TaskQueue: "q", Identity: "w", Rates: map[string]providers.Rates{"a": {Submits: LaneMinRate}}}
	for range 3 {
		keepOnce(s.acts.Pace)
	}
	req := SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"a": "b"}, RunID: "run-1", Submission: 1, Lane: queueA}
	_, err := s.env.ExecuteActivity(s.acts.Submit, req)
	s.Require().NoError(err)
	_, err = s.env.ExecuteActivity(s.acts.Submit, req)
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	s.Require().True(ok, "%v", err)
	s.Equal(FailureLaneSpent, appErr.Type())
	s.True(appErr.NonRetryable())
	s.Len(s.provider.pingbacks, 1, "the provider got the second Submit")
}

// TestSubmitHandsBackTheWorkersCallbackTimeoutForTheMethod: CALLBACK_TIMEOUT_BY_METHOD reaches the workflow in
// Submit's result, for the method submitted only.
func (s *ActivitiesSuite) TestSubmitHandsBackTheWorkersCallbackTimeoutForTheMethod() {
	s.acts.CallbackTimeoutByMethod = map[string]time.Duration{"turnstile": 45 * time.Second}
	for method, want := range map[string]int{"turnstile": 45, "userrecaptcha": 0} {
		v, err := s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: method, Params: map[string]string{"a": "b"}, RunID: "run-1", Submission: 1})
		s.Require().NoError(err)
		var res SubmitResult
		s.Require().NoError(v.Get(&res))
		s.Equal(want, res.CallbackTimeoutSeconds, method)
	}
}

func (s *ActivitiesSuite) TestProviderErrorsBecomeTypedApplicationErrors() {
	cases := []struct {
		err       error
		wantType  string
		retryable bool
	}{
		{&providers.Error{Op: "submit", Code: "ERROR_WRONG_USER_KEY", Class: callback.ClassConfig}, captchaflow.FailureProviderConfig, false},
		{&providers.Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: callback.ClassTransient}, FailureProviderTransient, true},
		{&providers.Error{Op: "get", Code: "ERROR_CAPTCHA_UNSOLVABLE", Class: callback.ClassResubmit}, FailureResubmit, false},
		{&providers.Error{Op: "get", Code: "CAPCHA_NOT_READY", Class: callback.ClassNotReady}, FailureNotReady, true},
		{&providers.Error{Op: "get", Code: "ERROR_SOMETHING_NEW", Class: callback.ClassUnknown}, captchaflow.FailureProviderUnknown, false},
		{context.DeadlineExceeded, FailureProviderTransient, true},
	}
	for _, c := range cases {
		s.provider.getErr = c.err
		_, err := s.env.ExecuteActivity(s.acts.Poll, PollRequest{ProviderTaskID: "1"})
		var appErr *temporal.ApplicationError
		s.Require().True(errors.As(err, &appErr), "%v", err)
		s.Equal(c.wantType, appErr.Type(), c.err.Error())
		s.Equal(!c.retryable, appErr.NonRetryable(), c.err.Error())
	}
}

func (s *ActivitiesSuite) TestSubmitWithoutCallbackSecretIsAWorkerConfigError() {
	s.acts.CallbackSecret = ""
	_, err := s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "x", Params: map[string]string{}, RunID: "run-1", Submission: 1})
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr))
	s.Equal(FailureWorkerConfig, appErr.Type())
	s.Empty(s.provider.pingbacks)
}

// receiver is a notify_url that verifies Standard Webhooks signatures.
func (s *ActivitiesSuite) receiver(status int, verify *standardwebhooks.Webhook) (*httptest.Server, *[]http.Header) {
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.NoError(verify.Verify(body, r.Header), "signature must verify")
		s.Equal("application/json", r.Header.Get("Content-Type"))
		seen = append(seen, r.Header.Clone())
		w.WriteHeader(status)
	}))
	s.T().Cleanup(srv.Close)
	return srv, &seen
}

func (s *ActivitiesSuite) TestDeliverSignsPerStandardWebhooks() {
	wh, _ := standardwebhooks.NewWebhookRaw([]byte("notify-secret-value"))
	srv, seen := s.receiver(http.StatusNoContent, wh)
	body := json.RawMessage(`{"task_id":"default-test-workflow-id","code":"C"}`)
	_, err := s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: srv.URL, Body: body})
	s.Require().NoError(err)
	s.Require().Len(*seen, 1)
	s.Equal("default-test-workflow-id.default-test-run-id", (*seen)[0].Get("webhook-id"))
	s.True(strings.HasPrefix((*seen)[0].Get("webhook-signature"), "v1,"))

	// A reset run names its chain's first run: the receiver sees the delivery it already has.
	_, err = s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: srv.URL, Body: body, RunID: "first-run"})
	s.Require().NoError(err)
	s.Equal("default-test-workflow-id.first-run", (*seen)[1].Get("webhook-id"))
}

func (s *ActivitiesSuite) TestDeliverWithWhsecSecret() {
	s.acts.NotifySecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(s.acts.NotifySecret)
	s.Require().NoError(err)
	srv, _ := s.receiver(http.StatusOK, wh)
	_, err = s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: srv.URL, Body: json.RawMessage(`{}`)})
	s.NoError(err)
}

func (s *ActivitiesSuite) TestDeliverNon2xxIsRetryable() {
	wh, _ := standardwebhooks.NewWebhookRaw([]byte("notify-secret-value"))
	srv, _ := s.receiver(http.StatusServiceUnavailable, wh)
	_, err := s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: srv.URL, Body: json.RawMessage(`{}`)})
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr))
	s.Equal(FailureDeliveryRejected, appErr.Type())
	s.False(appErr.NonRetryable())
	s.Contains(appErr.Error(), "503")
}

func (s *ActivitiesSuite) TestDeliverWithoutNotifySecretIsRetryableAndSaysWhy() {
	s.acts.NotifySecret = ""
	_, err := s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: "http://127.0.0.1:1", Body: json.RawMessage(`{}`)})
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr))
	s.Equal(FailureWorkerConfig, appErr.Type())
	s.False(appErr.NonRetryable(), "fixing the config must let the delivery go through")
	s.Contains(appErr.Error(), "NOTIFY_SECRET")
}

func TestRequestTypesCarryNoSecrets(t *testing.T) {
	// Activity inputs and results are written to workflow history; none may have a field for a secret.
	for _, v := range []any{SubmitRequest{}, SubmitResult{}, PollRequest{}, PollResult{}, DeliverRequest{}} {
		js, err := json.Marshal(v)
		require.NoError(t, err)
		for _, word := range []string{"key", "secret", "token", "pingback"} {
			assert.NotContains(t, strings.ToLower(string(js)), word)
		}
	}
}

// slowWorkflow runs the Slow activity with a 300 ms heartbeat timeout: keepAlive beats every 100 ms.
func slowWorkflow(ctx workflow.Context) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, HeartbeatTimeout: 300 * time.Millisecond})
	var after int
	err := workflow.ExecuteActivity(ctx, "Slow").Get(ctx, &after)
	return after, err
}

func (s *ActivitiesSuite) TestKeepAliveHeartbeatsUntilStopped() {
	env := s.NewTestWorkflowEnvironment()
	beats := make(chan struct{}, 64)
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats <- struct{}{} })
	env.RegisterActivityWithOptions(func(ctx context.Context) (int, error) {
		stop := keepAlive(ctx)
		select { // a request that is still open after several intervals
		case <-beats:
		case <-time.After(5 * time.Second):
			return 0, errors.New("no heartbeat while the request was in flight")
		}
		stop()
		n := len(beats)
		time.Sleep(200 * time.Millisecond) // two intervals: long enough for a stray tick to show, within the timeout
		return len(beats) - n, nil
	}, activity.RegisterOptions{Name: "Slow"})
	env.ExecuteWorkflow(slowWorkflow)
	s.Require().NoError(env.GetWorkflowError())
	var after int
	s.Require().NoError(env.GetWorkflowResult(&after))
	s.LessOrEqual(after, 1, "at most a tick already under way when stop was called")
}

// A provider success answer that cannot be what it claims (a task id that is not an id, an empty or oversized
// code) fails the activity for good as ProviderUnknown: it never becomes a provider task ID or a result.
func (s *ActivitiesSuite) TestInvalidProviderAnswersAreNonRetryableProviderUnknown() {
	for _, c := range []struct{ body, op string }{
		{"OK|../../res.php?action=reportbad", "submit"},
		{`{"status":1,"request":""}`, "submit"},
		{`{"status":1,"request":""}`, "get"},
		{"OK|" + strings.Repeat("x", captchaflow.MaxCodeBytes+1), "get"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, c.body)
		}))
		client, err := providers.NewInPHP(srv.URL, "k")
		s.Require().NoError(err)
		s.acts.Provider = client
		if c.op == "submit" {
			_, err = s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "hcaptcha", Params: map[string]string{"sitekey": "s"}, RunID: "run-1", Submission: 1})
		} else {
			_, err = s.env.ExecuteActivity(s.acts.Poll, PollRequest{ProviderTaskID: "7300000001"})
		}
		srv.Close()
		var appErr *temporal.ApplicationError
		s.Require().True(errors.As(err, &appErr), "%s %.40q: %v", c.op, c.body, err)
		s.Equal(captchaflow.FailureProviderUnknown, appErr.Type(), c.body)
		s.True(appErr.NonRetryable(), c.body)
		s.Contains(appErr.Error(), providers.ErrInvalidAnswer.Error())
	}
}

// instantProvider answers a submission with its code, as CapSolver does an image task.
type instantProvider struct{ *fakeProvider }

func (p instantProvider) Submit(context.Context, string, map[string]string, string) (string, string, error) {
	return "7300000002", "IMAGE-TEXT", nil
}

// TestCodesAreStampedWhenTheWorkerGotThem: Poll's code and a code in the Submit answer carry when this worker got
// them (the workflow's received_at, whenever its workflow task runs); an answer without a code carries no stamp.
func (s *ActivitiesSuite) TestCodesAreStampedWhenTheWorkerGotThem() {
	before := time.Now()
	v, err := s.env.ExecuteActivity(s.acts.Poll, PollRequest{ProviderTaskID: "7300000001"})
	s.Require().NoError(err)
	var polled PollResult
	s.Require().NoError(v.Get(&polled))
	v, err = s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"a": "b"}, RunID: "r", Submission: 1})
	s.Require().NoError(err)
	var accepted SubmitResult
	s.Require().NoError(v.Get(&accepted))
	s.acts.Provider = instantProvider{s.provider}
	v, err = s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "base64", Params: map[string]string{"body": "aGk="}, RunID: "r", Submission: 2})
	s.Require().NoError(err)
	var instant SubmitResult
	s.Require().NoError(v.Get(&instant))
	after := time.Now()

	for what, at := range map[string]time.Time{"poll": polled.ReceivedAt, "instant answer": instant.ReceivedAt} {
		s.False(at.Before(before) || at.After(after), "%s stamped %v, not between %v and %v", what, at, before, after)
	}
	s.Equal("IMAGE-TEXT", instant.Code)
	s.True(accepted.ReceivedAt.IsZero(), "an answer without a code is not stamped")
	js, _ := json.Marshal(accepted)
	s.NotContains(string(js), "received_at")
}

// A worker killed mid-request leaves Submit's last heartbeat in the timeout the workflow gets: it says where the
// submission went (provider, price, URL), as a lost answer's details do (issue 29 §6: a paid submission has a price).
func (s *ActivitiesSuite) TestSubmitHeartbeatsWhereItWent() {
	var beats []LostDetails
	s.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var l LostDetails
		if d.HasValues() && d.Get(&l) == nil {
			beats = append(beats, l)
		}
	})
	_, err := s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"a": "b"},
		RunID: "run-1", Submission: 1})
	s.Require().NoError(err)
	s.Require().NotEmpty(beats, "a heartbeat before the request")
	s.Equal("run-1", beats[0].RunID)
	// Nothing the workflow cannot tell itself (one provider, no price, its own run): no beat, a server write saved.
	beats = nil
	_, err = s.env.ExecuteActivity(s.acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"a": "b"},
		RunID: "default-test-run-id", Submission: 1})
	s.Require().NoError(err)
	s.Empty(beats)
}
