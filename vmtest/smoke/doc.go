// Package smoke proves the VM test rig (vmtest/run.sh, `make vmtest`) end to
// end: its tests, built only with the vmtest tag and run inside the QEMU
// guest, check that the guest runs the pinned Debian kernel, that the
// sch_netem, sch_prio and cls_u32 modules are loaded, that a netem qdisc
// applied with iproute2's tc delays TCP connects and reads back through
// `tc -s qdisc show`, and that a BPF tracepoint program loads and counts
// syscalls through cilium/ebpf. Outside the VM they skip.
package smoke
