package durable_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind. Tests in
// synctest bubbles are also checked by synctest itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
