package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// The throughput phase's encrypted scenarios (issue 38): the default ones' tasks with every payload encrypted by
// the product's codec — the worker's, the driver's starts and results, the ingress's callback signals — on a
// worker of their own; what the codec costs is their figures against plaintext tasks in the same rounds (codec.go).

// encryptedQueue is the encrypted worker's task queue: of its own, as the stack's worker cannot read its payloads.
func (b *bench) encryptedQueue() string { return b.taskQueue + "-encrypted" }

// encryptedScenarios are the default scenarios again, encrypted, unless -codec=false.
func (b *bench) encryptedScenarios(defaults []scenario) []scenario {
	if !b.cfg.codec {
		return nil
	}
	var out []scenario
	for _, sc := range defaults {
		sc.Name, sc.Queue, sc.Rounds = scenarioEncrypted, b.encryptedQueue(), b.cfg.codecRounds
		sc.Description = "solved at once, every payload encrypted by the codec (a worker of its own, the driver's client " +
			"and the ingress with the key): against plaintext tasks in the same rounds, what the codec costs"
		out = append(out, sc)
	}
	return out
}

// encrypt prepares the encrypted scenarios: a keys file of the run's own, the driver's client with the codec,
// and the ingress restarted with the key, so that the callbacks' signals are encrypted too.
func (b *bench) encrypt(ctx context.Context) error {
	if b.keysFile == "" {
		path := filepath.Join(b.runDir, "bench.keys")
		if err := os.WriteFile(path, []byte(codec.NewKeyLine("bench")), 0o600); err != nil {
			return fmt.Errorf("writing the keys file: %w", err)
		}
		b.keysFile = path
	}
	opts := client.Options{HostPort: b.st.TemporalAddress(), Namespace: b.st.Namespace(), Logger: devstack.QuietSDKLogger()}
	if _, err := codec.Configure(&opts, b.keysFile, nil); err != nil {
		return err
	}
	var err error
	if b.enc, err = client.DialContext(ctx, opts); err != nil {
		return err
	}
	return b.keyIngress(ctx, true)
}

// checkEncrypted reads task id's history through the plain client and fails unless its input, result and
// callback signal are stored encrypted: else the scenario would measure plaintext under the codec's name.
func (b *bench) checkEncrypted(ctx context.Context, id string) error {
	it := b.c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	seen := map[enums.EventType]int{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("reading %s's history: %w", id, err)
		}
		for _, p := range eventPayloads(ev) {
			if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != codec.EncodingEncrypted {
				return fmt.Errorf("%s: a payload of its %s is stored as %q, not encrypted", id, ev.GetEventType(), enc)
			}
			seen[ev.GetEventType()]++
		}
	}
	for _, t := range []enums.EventType{enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED} {
		if seen[t] == 0 {
			return fmt.Errorf("%s: no encrypted payload in a %s event", id, t)
		}
	}
	log.Printf("%s: every payload of its history is %s (%v)", id, codec.EncodingEncrypted, seen)
	return nil
}

// eventPayloads are the payloads an event carries that the codec encodes (search attributes and memo aside).
func eventPayloads(ev *historypb.HistoryEvent) []*commonpb.Payload {
	var ps []*commonpb.Payload
	for _, p := range []*commonpb.Payloads{
		ev.GetWorkflowExecutionStartedEventAttributes().GetInput(),
		ev.GetWorkflowExecutionSignaledEventAttributes().GetInput(),
		ev.GetWorkflowExecutionCompletedEventAttributes().GetResult(),
		ev.GetActivityTaskScheduledEventAttributes().GetInput(),
		ev.GetActivityTaskCompletedEventAttributes().GetResult(),
		ev.GetMarkerRecordedEventAttributes().GetDetails()["data"],
	} {
		ps = append(ps, p.GetPayloads()...)
	}
	return ps
}
