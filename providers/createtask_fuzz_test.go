package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// The fuzz targets feed arbitrary provider answers to the client. Run one with
//
//	go test -run '^$' -fuzz '^FuzzCreateTaskAnswer$' -fuzztime 2m ./providers/

// ctAnswerTransport answers every request with one status and body, in memory.
type ctAnswerTransport struct {
	status int
	body   []byte
}

func (a ctAnswerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), Request: req}, nil
}

var fuzzSeeds = []string{
	`{"errorId":0,"taskId":7654321}`,
	`{"errorId":0,"taskId":"37223a89-06ed-442c-a0b8-22067b79c5b4"}`,
	`{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03AGdBq25"}}`,
	`{"errorId":0,"status":"ready","solution":{"text":"44795sds"},"taskId":"2376919c"}`,
	`{"errorId":0,"status":"ready","solution":{"challenge":"c","validate":"v","seccode":"s"}}`,
	`{"errorId":0,"status":"processing"}`,
	`{"errorId":1,"errorCode":"ERROR_NO_SLOT_AVAILABLE","errorDescription":"no slot"}`,
	`{"errorId":"1","errorCode":"ERROR_CAPTCHA_SOLVE_FAILED","status":"failed"}`,
	`{"errorId":0,"balance":3.5}`,
	`<html>bad gateway</html>`, ``, `{"errorId":0,"taskId":1e300}`,
}

// FuzzCreateTaskAnswer: whatever a provider answers, each call returns either a *Error of a known class that
// does not contain the key, or a task ID taskIDPattern accepts and a code within the bound — never anything else.
func FuzzCreateTaskAnswer(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(200, []byte(s))
		f.Add(400, []byte(s))
	}
	classes := map[callback.Class]bool{callback.ClassConfig: true, callback.ClassTransient: true,
		callback.ClassResubmit: true, callback.ClassNotReady: true, callback.ClassUnknown: true}
	const maxCode = 256
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		body = bytes.ReplaceAll(body, []byte("KEY"), []byte(testKey)) // let the fuzzer echo the key
		checkErr := func(err error) {
			var ce *Error
			if !errors.As(err, &ce) || !classes[ce.Class] {
				t.Fatalf("error %v is not a classified *Error", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q contains the key", err)
			}
		}
		for _, flavor := range Flavors {
			c, err := NewCreateTask(flavor, "https://provider.invalid", testKey, withMaxCode(maxCode),
				WithHTTPClient(&http.Client{Transport: ctAnswerTransport{status, body}}))
			if err != nil {
				t.Fatal(err)
			}
			id, _, err := c.Submit(context.Background(), "base64", map[string]string{"body": pngB64}, "")
			if err != nil {
				checkErr(err)
			} else if !taskIDPattern.MatchString(id) {
				t.Fatalf("Submit returned %q, not a task id", id)
			}
			code, err := c.Get(context.Background(), "12345")
			if err != nil {
				checkErr(err)
			} else if code == "" || len(code) > maxCode {
				t.Fatalf("Get returned a %d-byte code", len(code))
			}
			if _, err := c.Balance(context.Background()); err != nil {
				checkErr(err)
			}
		}
	})
}
