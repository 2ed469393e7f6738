package testenv

import "runtime"

// HeapGrowth returns how many bytes the live heap grew while fill ran,
// after a garbage collection on each side; what fill returns is kept live
// until the second is measured (the structure whose size is asked).
func HeapGrowth(fill func() any) int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	kept := fill()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(kept)
	return int64(ms.HeapAlloc) - int64(before)
}
