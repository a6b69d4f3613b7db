package main

import (
	"context"
	"time"
)

// The admission phase: SolveCaptcha batches against a capped provider with PROVIDER_THREADS unset and set, side
// by side in one run.
const (
	// The batches: the plan not the bottleneck (bigTasks against bigCap threads) and the plan the bottleneck
	// (smallTasks against smallCap), solved batchSolve after they are accepted.
	bigTasks   = 200
	bigCap     = 40
	smallTasks = 24
	smallCap   = 4
	batchSolve = 2 * time.Second
	// batchCallbackTimeout is the tasks' callback_timeout_seconds (the measure).
	batchCallbackTimeout = 5

	maxBigBatchRatio  = 1.1
	maxSmallNoSlot    = 0.05
	maxSmallBusyIdeal = 1.2
)

// AdmissionResult is the admission phase.
type AdmissionResult struct {
	// BigUnset / BigSet: bigTasks at once against bigCap provider threads, PROVIDER_THREADS unset and = bigCap.
	BigUnset BatchFigures `json:"big_unset"`
	BigSet   BatchFigures `json:"big_set"`
	// BigRatio is BigSet's wall time over BigUnset's.
	BigRatio   float64      `json:"big_ratio"`
	SmallUnset BatchFigures `json:"small_unset"`
	SmallSet   BatchFigures `json:"small_set"`
}

func (b *bench) admission(ctx context.Context) (*AdmissionResult, error) {
	res := &AdmissionResult{}
	if err := b.admissionBatches(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}
