/* Helpers that fsync.bpf.c, stacked.bpf.c and hypervisor.bpf.c share to
 * name a file at the moment of a call: fd -> struct file, and the inode,
 * filesystem and last path components of a struct file. */
#ifndef ETCDSCOPE_FILE_H
#define ETCDSCOPE_FILE_H

#include "fsync.h"
#include "compat.h"

#define ES_S_IFMT 00170000
#define ES_S_IFBLK 0060000

/* es_fd_file returns the current task's struct file for fd, or NULL. */
static __always_inline struct file *es_fd_file(int fd)
{
	struct fdtable *fdt;
	struct file **fds;
	struct file *f = NULL;
	unsigned int max_fds;

	if (es_task_btf) {
		/* task is a BTF pointer: plain loads, cheaper than probe reads. */
		struct task_struct *task = bpf_get_current_task_btf();

		fdt = task->files->fdt;
		if (!fdt)
			return NULL;
		max_fds = fdt->max_fds;
		fds = fdt->fd;
	} else {
		struct task_struct *task = (void *)bpf_get_current_task();

		fdt = BPF_CORE_READ(task, files, fdt);
		if (!fdt)
			return NULL;
		max_fds = BPF_CORE_READ(fdt, max_fds);
		fds = BPF_CORE_READ(fdt, fd);
	}
	if (fd < 0 || (unsigned int)fd >= max_fds)
		return NULL;
	/* a variable index into a BTF pointer is refused: probe read */
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/* es_file_ident reads what identifies f's file: inode number, device (the
 * filesystem's, or the device itself for a block device node) and the
 * filesystem type's name (fstype_len bytes). */
static __always_inline void es_file_ident(struct file *f, __u64 *ino, __u32 *dev, __u8 *is_blockdev,
					  char *fstype, __u32 fstype_len)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);

	*ino = BPF_CORE_READ(inode, i_ino);
	if ((BPF_CORE_READ(inode, i_mode) & ES_S_IFMT) == ES_S_IFBLK) {
		*is_blockdev = 1;
		*dev = BPF_CORE_READ(inode, i_rdev);
	} else {
		*dev = BPF_CORE_READ(inode, i_sb, s_dev);
	}
	bpf_probe_read_kernel_str(fstype, fstype_len, BPF_CORE_READ(inode, i_sb, s_type, name));
}

/* es_file_names copies the d_name of f and of up to three parents,
 * innermost first, stopping at the root. */
static __always_inline void es_file_names(struct file *f, char names[ES_PATH_DEPTH][ES_NAME_LEN])
{
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);

#pragma unroll
	for (int i = 0; i < ES_PATH_DEPTH; i++) {
		struct dentry *parent;

		if (!d)
			break;
		bpf_probe_read_kernel_str(names[i], ES_NAME_LEN, BPF_CORE_READ(d, d_name.name));
		parent = BPF_CORE_READ(d, d_parent);
		if (parent == d)
			break;
		d = parent;
	}
}

/* es_fill_file fills an fsync_event's file fields from f. */
static __always_inline void es_fill_file(struct fsync_event *e, struct file *f)
{
	if (!f)
		return;
	es_file_ident(f, &e->ino, &e->dev, &e->is_blockdev, e->fstype, sizeof(e->fstype));
	es_file_names(f, e->names);
}

#endif
