/* The cache of named files that fsync.bpf.c fills and write.bpf.c reads:
 * write.bpf.c follows only the files the fsync tracer has named (a file
 * the process fsyncs), and both name them from the same entries. Go
 * creates the map once with the fsync object and hands it to the write
 * object as a map replacement. */
#ifndef ETCDSCOPE_FILECACHE_H
#define ETCDSCOPE_FILECACHE_H

#include "file.h"

/* struct file_info: what es_file_ident and es_file_names read from one
 * open file, and what says it still holds: the file's dentry, its parent,
 * and both names' hash_len (a rename changes the name's hash or length,
 * and moves the dentry to another parent). */
struct file_info {
	__u64 dentry;
	__u64 parent;
	__u64 hash_len;
	__u64 parent_hash_len;
	__u64 ino;
	__u32 dev;
	__u8 is_blockdev;
	__u8 _pad[3];
	char fstype[ES_COMM_LEN];
	char names[ES_PATH_DEPTH][ES_NAME_LEN];
};

/* files: struct file address -> its file_info. A process fsyncs the same
 * open files again and again (etcd: the current WAL segment), and naming
 * a file is most of an fsync's BPF cost when the dentries are cold in the
 * cache: ~20 reads and 5 string copies against 4 reads to check an entry.
 * A renamed file or directory (etcd renames wal.tmp to wal with the first
 * segment open) fails the check and is read again; renames further up
 * than the parent are not seen until the entry is evicted or the file is
 * closed and another opened at that address. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct file_info);
} files SEC(".maps");

/* info_scratch: per-CPU space to build a file_info (too big for the stack
 * next to the rest). Each object that includes this has its own (Go shares
 * files, not this), and in each only classic tracepoint programs (which
 * the kernel never nests on one another: bpf_prog_active) or a single
 * program use it, so no run overwrites it between the memset and the
 * update of files (tracer/scratch_test.go keeps it so). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_info);
} info_scratch SEC(".maps");

/* es_cached_file returns f's file_info from files when its entry still
 * holds, else reads it again (and caches it); NULL when it cannot. The
 * check's four reads are plain loads where the kernel has
 * bpf_rdonly_cast (compat.h): ~100-150 ns less per call than four
 * probe-read helper calls on fio's fsyncs (bench/findings.md 17). */
static __always_inline struct file_info *es_cached_file(struct file *f)
{
	__u64 key = (__u64)f, hash_len, parent_hash_len;
	struct dentry *d, *p;
	struct file_info *fi;
	__u32 zero = 0;

	if (bpf_rdonly_cast) {
		struct file *bf = es_cast(f, struct file);

		d = bf->f_path.dentry;
		p = d->d_parent;
		hash_len = d->d_name.hash_len;
		parent_hash_len = p->d_name.hash_len;
	} else {
		d = BPF_CORE_READ(f, f_path.dentry);
		p = BPF_CORE_READ(d, d_parent);
		hash_len = BPF_CORE_READ(d, d_name.hash_len);
		parent_hash_len = BPF_CORE_READ(p, d_name.hash_len);
	}
	fi = bpf_map_lookup_elem(&files, &key);

	if (fi && fi->dentry == (__u64)d && fi->parent == (__u64)p && fi->hash_len == hash_len &&
	    fi->parent_hash_len == parent_hash_len)
		return fi;
	fi = bpf_map_lookup_elem(&info_scratch, &zero);
	if (!fi)
		return NULL;
	__builtin_memset(fi, 0, sizeof(*fi));
	fi->dentry = (__u64)d;
	fi->parent = (__u64)p;
	fi->hash_len = hash_len;
	fi->parent_hash_len = parent_hash_len;
	es_file_ident(f, &fi->ino, &fi->dev, &fi->is_blockdev, fi->fstype, sizeof(fi->fstype));
	es_file_names(f, fi->names);
	/* A full LRU evicts; a failed update only costs the next call a
	 * walk. */
	bpf_map_update_elem(&files, &key, fi, BPF_ANY);
	return fi;
}

/* es_followed says whether f is a file the fsync tracer has named (its
 * entry in files is for f's dentry: a struct file freed and reused for
 * a socket or another file does not count). One lookup and one read. */
static __always_inline bool es_followed(struct file *f)
{
	__u64 key = (__u64)f;
	struct file_info *fi = bpf_map_lookup_elem(&files, &key);

	return fi && fi->dentry == (__u64)BPF_CORE_READ(f, f_path.dentry);
}

#endif
