// Tests of record.go.

package analysis

import "testing"

// TestLayersValuesInLayerNamesOrder: values, which the report's builders
// use per fsync, holds exactly what Get returns for each of LayerNames.
func TestLayersValuesInLayerNamesOrder(t *testing.T) {
	l := Layers{DataWritebackNs: 1, JournalNs: 2, DeviceFlushNs: 3, BlockQueueNs: 4, DMNs: 5, OtherNs: 6}
	if len(LayerNames) != numLayers {
		t.Fatalf("LayerNames has %d names, numLayers is %d", len(LayerNames), numLayers)
	}
	v := l.values()
	seen := map[int64]bool{}
	for i, n := range LayerNames {
		if v[i] != l.Get(n) {
			t.Errorf("values()[%d] = %d, Get(%q) = %d", i, v[i], n, l.Get(n))
		}
		seen[v[i]] = true
	}
	if len(seen) != numLayers {
		t.Errorf("values() = %v: not every field once", v)
	}
}
