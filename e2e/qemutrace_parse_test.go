package e2e

import (
	"reflect"
	"strings"
	"testing"
)

// TestQEMUTraceParse reads lines of QEMU 7.2's log-backend trace from the
// hypervisor test's runs: a qcow2 write (not a flush), a qcow2 flush that
// wrote its L2 table, fdatasynced, wrote its refcount block and
// fdatasynced again (four thread pool jobs, one request), a GET_ID-shaped
// request (two in descriptors: not a flush), and an io_uring flush.
func TestQEMUTraceParse(t *testing.T) {
	const trace = `14825@1796199681.361146:virtqueue_pop vq 0x7f208ae83010 elem 0x559ba373eea0 in_num 1 out_num 3
14825@1796199681.361155:virtio_blk_handle_write vdev 0x559ba32ca110 req 0x559ba373eea0 sector 100222 nsectors 4
14825@1796199681.361171:thread_pool_submit pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc3d0b20
14825@1796199681.361311:thread_pool_complete pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc3d0ae0 ret 0
14825@1796199681.361371:virtio_blk_req_complete vdev 0x559ba32ca110 req 0x559ba373eea0 status 0
14825@1796199681.361978:virtqueue_pop vq 0x7f208ae83010 elem 0x559ba22ef500 in_num 1 out_num 1
14825@1796199681.362013:thread_pool_submit pool 0x559ba2308c00 req 0x559ba2552c10 opaque 0x7f1ffc2cf8f0
14825@1796199681.362072:thread_pool_complete pool 0x559ba2308c00 req 0x559ba2552c10 opaque 0x7f1ffc2cf8b0 ret 0
14825@1796199681.362077:thread_pool_submit pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc2cfd50
14825@1796199681.363547:thread_pool_complete pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc2cfd10 ret 0
14825@1796199681.363566:thread_pool_submit pool 0x559ba2308c00 req 0x559ba2552c10 opaque 0x7f1ffc2cf9d0
14825@1796199681.363637:thread_pool_complete pool 0x559ba2308c00 req 0x559ba2552c10 opaque 0x7f1ffc2cf990 ret 0
14825@1796199681.363643:thread_pool_submit pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc2cfe70
14825@1796199681.364156:thread_pool_complete pool 0x559ba2308c00 req 0x559ba39053a0 opaque 0x7f1ffc2cfe30 ret 0
14825@1796199681.364180:virtio_blk_req_complete vdev 0x559ba32ca110 req 0x559ba22ef500 status 0
14825@1796199681.370000:virtqueue_pop vq 0x7f208ae83010 elem 0x559ba22ef500 in_num 2 out_num 1
14825@1796199681.370100:virtio_blk_req_complete vdev 0x559ba32ca110 req 0x559ba22ef500 status 0
6452@1796199682.247237:virtqueue_pop vq 0x7fa63fe8a010 elem 0x55d2c1c82900 in_num 1 out_num 1
6452@1796199682.247246:luring_co_submit bs 0x55d2c1e72650 s 0x55d2c1e6b410 luringcb 0x7fa5fc6f5d90 fd 14 offset 0 nbytes 0 type 8
6452@1796199682.247868:luring_process_completion LuringState 0x55d2c1e6b410 luringcb 0x7fa5fc6f5d90 ret 0
6452@1796199682.247878:virtio_blk_req_complete vdev 0x55d2c2f994d0 req 0x55d2c1c82900 status 0
`
	// Monotonic 1000 s behind realtime, both advancing together.
	before := clockSample{RealNs: 1796199600e9, MonoNs: 1796198600e9}
	after := clockSample{RealNs: 1796199700e9, MonoNs: 1796198700e9}
	got, err := qemuTrace(strings.NewReader(trace), before, after)
	if err != nil {
		t.Fatal(err)
	}
	m := func(s, us int64) int64 { return (s-1000)*1e9 + us*1e3 }
	want := []qemuFlush{
		{VQ: "0x7f208ae83010", PopNs: m(1796199681, 361978), DoneNs: m(1796199681, 364180), Jobs: []qemuJob{
			{qemuSpan{m(1796199681, 362013), m(1796199681, 362072)}, -1},
			{qemuSpan{m(1796199681, 362077), m(1796199681, 363547)}, -1},
			{qemuSpan{m(1796199681, 363566), m(1796199681, 363637)}, -1},
			{qemuSpan{m(1796199681, 363643), m(1796199681, 364156)}, -1}}},
		{VQ: "0x7fa63fe8a010", PopNs: m(1796199682, 247237), DoneNs: m(1796199682, 247878), Jobs: []qemuJob{
			{qemuSpan{m(1796199682, 247246), m(1796199682, 247868)}, 14}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if _, err := qemuTrace(strings.NewReader("14825@:virtqueue_pop vq 0x1 elem 0x2 in_num 1 out_num 1\n"), before, after); err == nil ||
		!strings.Contains(err.Error(), "-msg timestamp=on") {
		t.Errorf("a trace without timestamps: %v, want an error naming -msg timestamp=on", err)
	}
}
