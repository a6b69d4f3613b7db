package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

// checkSearchAttributes refuses to start without the workflow's search attributes (its upserts would stick every task).
func checkSearchAttributes(ctx context.Context, c client.Client, namespace string, routed bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes of namespace %q: %w", namespace, err)
	}
	var missing []string
	keys := captchaflow.BaseSearchAttributeKeys
	if routed { // CaptchaProvider is upserted only by tasks of a worker with PROVIDERS_FILE
		keys = captchaflow.SearchAttributeKeys
	}
	for _, key := range keys {
		name := key.GetName()
		if t, ok := resp.GetCustomAttributes()[name]; !ok || t != enums.INDEXED_VALUE_TYPE_KEYWORD {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var how []string
	for _, name := range missing {
		how = append(how, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type Keyword", namespace, name))
	}
	return fmt.Errorf("namespace %q lacks the Keyword search attribute(s) %s; register them with:\n  %s",
		namespace, strings.Join(missing, ", "), strings.Join(how, "\n  "))
}
