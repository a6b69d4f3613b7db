package callback

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		flavor      Flavor
		contentType string
		body        string
		want        Result
	}{
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=51555263943&code=ANSWER", Result{"51555263943", "ANSWER"}},
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=1&code=ERROR_CAPTCHA_UNSOLVABLE", Result{"1", "ERROR_CAPTCHA_UNSOLVABLE"}},
		{CapMonster, "application/json", `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03A"}}`, Result{"", "03A"}},
		{AntiCaptcha, "application/json", `{"errorId":0,"taskId":7654321,"status":"ready","solution":{"text":"deditur"}}`, Result{"7654321", "deditur"}},
		{CapSolver, "application/json", `{"errorId":1,"errorCode":"ERROR_CAPTCHA_SOLVE_FAILED","taskId":"da450cbc-ff9d","status":"failed"}`,
			Result{"da450cbc-ff9d", "ERROR_CAPTCHA_SOLVE_FAILED"}},
	} {
		got, err := Parse(tc.flavor, tc.contentType, []byte(tc.body))
		require.NoError(t, err, tc.body)
		assert.Equal(t, tc.want, got)
	}
	for _, bad := range []struct {
		flavor Flavor
		ct     string
		body   string
	}{
		{TwoCaptcha, "application/json", `{"id":1}`},
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=1"},
		{CapMonster, "application/json", `{"status":"ready"}`},
		{CapMonster, "application/json", `{"errorId":0,"status":"processing"}`},
		{CapMonster, "application/json", `{"errorId":0,"status":"ready","solution":{}}`},
		{"nope", "", ""},
	} {
		_, err := Parse(bad.flavor, bad.ct, []byte(bad.body))
		assert.ErrorIs(t, err, ErrBody, bad.body)
	}
}
