package main

import (
	"slices"
	"testing"
)

// TestTeardownRunsLateCleanupsInReverse: run defers td.run() before setUp adds the cleanups, as defers would.
func TestTeardownRunsLateCleanupsInReverse(t *testing.T) {
	var got []int
	func() {
		var td teardown
		defer td.run()
		for i := range 3 {
			td.add(func() { got = append(got, i) })
		}
	}()
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("cleanups ran as %v, want %v", got, want)
	}
}
