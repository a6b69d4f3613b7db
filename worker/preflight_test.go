package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/mocks"
	"google.golang.org/grpc"
)

// operatorService answers ListSearchAttributes with a fixed set.
type operatorService struct {
	operatorservice.OperatorServiceClient
	attrs map[string]enums.IndexedValueType
}

func (o operatorService) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: o.attrs}, nil
}

func clientWith(attrs map[string]enums.IndexedValueType) *mocks.Client {
	c := &mocks.Client{}
	c.On("OperatorService", mock.Anything).Return(operatorService{attrs: attrs}).Maybe()
	c.On("OperatorService").Return(operatorService{attrs: attrs}).Maybe()
	return c
}

func TestPreflightPassesWithBothKeywordAttributes(t *testing.T) {
	c := clientWith(map[string]enums.IndexedValueType{
		"CaptchaTaskId": enums.INDEXED_VALUE_TYPE_KEYWORD,
		"CaptchaPhase":  enums.INDEXED_VALUE_TYPE_KEYWORD,
	})
	require.NoError(t, checkSearchAttributes(context.Background(), c, "default", false))
	// A worker with PROVIDERS_FILE needs CaptchaProvider besides.
	err := checkSearchAttributes(context.Background(), c, "default", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--name CaptchaProvider --type Keyword")
}

func TestPreflightSaysHowToRegisterMissingOrMistypedAttributes(t *testing.T) {
	c := clientWith(map[string]enums.IndexedValueType{"CaptchaPhase": enums.INDEXED_VALUE_TYPE_TEXT})
	err := checkSearchAttributes(context.Background(), c, "prod", false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CaptchaTaskId, CaptchaPhase")
	assert.Contains(t, err.Error(), "temporal operator search-attribute create --namespace prod --name CaptchaTaskId --type Keyword")
}
