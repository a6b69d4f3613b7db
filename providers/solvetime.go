package providers

import (
	"slices"
	"time"
)

// minTimesForFirstPoll: fewer solves than this say too little of a provider's pace to hold a poll back.
const minTimesForFirstPoll = 4

// FirstPoll is how long after its submission a task's first poll is worth making: half the lower quartile of provider's
// latest solve times of method (0 while it knows fewer than minTimesForFirstPoll), so a poll spends no request on a
// task the provider has hardly begun. Half: a solve found by a poll is learned no sooner than the poll, so a hold at
// the quartile itself would only ever grow while callbacks are down.
func (m *Model) FirstPoll(provider, method string) (d time.Duration) {
	m.with(provider, method, func(s *stats) {
		var solved []float64
		for _, t := range s.times {
			if !t.open {
				solved = append(solved, t.secs)
			}
		}
		if len(solved) >= minTimesForFirstPoll {
			slices.Sort(solved)
			d = time.Duration(solved[len(solved)/4] * float64(time.Second) / 2)
		}
	})
	return d
}
