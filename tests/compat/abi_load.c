/* SPDX-License-Identifier: MIT */
/*
 * What a real consumer of libibverbs.so.1 sees when ours is the one loaded.
 * Built against Debian's libibverbs (so it binds to the same versioned
 * symbols as any Debian binary), run by abi_symbols.sh with our library
 * first on LD_LIBRARY_PATH.  Checks:
 *   - the libibverbs.so.1 mapped into the process is ours ($SV_BUILD_DIR);
 *   - Debian's libmlx5, libefa and librdmacm load (they need every
 *     IBVERBS_PRIVATE_34 symbol) and bind to our library;
 *   - mlx5dv_is_supported() is false and mlx5dv/efadv refuse our device;
 *   - no op slot of an opened context is NULL (verbs.h inlines call them);
 *   - the hidden 1.0/1.1 compat versions and the private provider helpers
 *     answer their "not supported" errors instead of crashing.
 * Prints "FAIL: ..." lines and exits 1 on any failure.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL: %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
			failures++;                                            \
		}                                                              \
	} while (0)

/* The path of the mapped file whose name ends in /libname, or "". */
static void mapped_path(const char *libname, char *out, size_t outlen)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "r");
	size_t ln = strlen(libname);

	out[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		size_t len;

		if (!path)
			continue;
		len = strcspn(path, "\n");
		path[len] = 0;
		if (len > ln && path[len - ln - 1] == '/' &&
		    !strcmp(path + len - ln, libname)) {
			snprintf(out, outlen, "%s", path);
			break;
		}
	}
	fclose(f);
}

static void check_ours(const char *when)
{
	char path[PATH_MAX], real[PATH_MAX], want[PATH_MAX];
	const char *build = getenv("SV_BUILD_DIR");

	mapped_path("libibverbs.so.1.14.44.0", path, sizeof(path));
	if (!path[0])
		mapped_path("libibverbs.so.1", path, sizeof(path));
	CHECK(path[0], "%s: no libibverbs.so.1 mapped", when);
	if (!build || !path[0])
		return;
	snprintf(want, sizeof(want), "%s/lib", build);
	if (!realpath(want, real))
		snprintf(real, sizeof(real), "%s", want);
	strncat(real, "/", sizeof(real) - strlen(real) - 1);
	CHECK(!strncmp(path, real, strlen(real)),
	      "%s: libibverbs mapped from %s, not from %s", when, path, real);
}

static void *load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);

	CHECK(h, "dlopen(%s): %s", lib, dlerror());
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = h ? dlsym(h, name) : NULL;

	CHECK(p, "dlsym(%s): %s", name, h ? dlerror() : "library not loaded");
	return p;
}

/*
 * verbs.h's static inlines (ibv_post_send, ibv_poll_cq, ibv_create_cq_ex,
 * ibv_alloc_dm, ...) jump straight through these slots, compiled into the
 * application: every one must point somewhere, even for an unsupported
 * verb, or the application crashes instead of getting EOPNOTSUPP.
 */
static void check_op_slots(struct ibv_context *ctx)
{
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	void **p;

	CHECK(vctx, "no verbs_context: abi_compat %p", ctx->abi_compat);
	if (!vctx)
		return;
	CHECK(vctx->sz >= sizeof(*vctx), "verbs_context.sz %zu < %zu",
	      vctx->sz, sizeof(*vctx));
	for (p = (void **)vctx; p < (void **)&vctx->sz; p++)
		if (p != (void **)&vctx->priv && /* data, not ops */
		    p != (void **)&vctx->_ABI_placeholder3)
			CHECK(*p, "verbs_context slot at offset %zu is NULL",
			      (size_t)((char *)p - (char *)vctx));
	for (p = (void **)&ctx->ops; p < (void **)(&ctx->ops + 1); p++)
		CHECK(*p, "ibv_context.ops slot at offset %zu is NULL",
		      (size_t)((char *)p - (char *)&ctx->ops));
}

static void check_providers(void)
{
	void *mlx5 = load("libmlx5.so.1");
	void *efa = load("libefa.so.1");
	void *rdmacm = load("librdmacm.so.1");
	bool (*is_supported)(struct ibv_device *) =
		(bool (*)(struct ibv_device *))sym(mlx5, "mlx5dv_is_supported");
	struct ibv_context *(*mlx5_open)(struct ibv_device *, void *) =
		(struct ibv_context * (*)(struct ibv_device *, void *))
			sym(mlx5, "mlx5dv_open_device");
	int (*efa_query)(struct ibv_context *, void *, uint32_t) =
		(int (*)(struct ibv_context *, void *, uint32_t))
			sym(efa, "efadv_query_device");
	void *(*get_devices)(int *) =
		(void *(*)(int *))sym(rdmacm, "rdma_get_devices");
	void (*free_devices)(void *) =
		(void (*)(void *))sym(rdmacm, "rdma_free_devices");
	struct ibv_device **list;
	struct ibv_context *ctx;
	int n = -1;

	check_ours("after loading the providers");

	list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "ibv_get_device_list: %p n=%d errno=%d",
	      (void *)list, n, errno);
	if (!list || n < 1)
		return;
	CHECK(!strcmp(ibv_get_device_name(list[0]), "sv0"), "device name %s",
	      ibv_get_device_name(list[0]));

	if (is_supported)
		CHECK(!is_supported(list[0]),
		      "mlx5dv_is_supported() claims our device");
	if (mlx5_open) {
		errno = 0;
		ctx = mlx5_open(list[0], NULL);
		CHECK(!ctx && errno == EOPNOTSUPP,
		      "mlx5dv_open_device: %p errno=%d", (void *)ctx, errno);
	}

	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "ibv_open_device: errno=%d", errno);
	if (ctx)
		check_op_slots(ctx);
	if (ctx && efa_query) {
		char attr[256];
		int ret = efa_query(ctx, attr, sizeof(attr));

		CHECK(ret == EOPNOTSUPP, "efadv_query_device: %d", ret);
	}
	if (ctx)
		CHECK(!ibv_close_device(ctx), "ibv_close_device");

	/* rdma-cm has no kernel side here: it must fail, not crash. */
	if (get_devices && free_devices) {
		void *cml = get_devices(&n);

		printf("rdma_get_devices: %s (n=%d)\n", cml ? "list" : "NULL",
		       cml ? n : -1);
		if (cml)
			free_devices(cml);
	}
	ibv_free_device_list(list);
}

typedef void *(*ptr_fn)(void *, void *, void *, void *, void *);
typedef int (*int_fn)(void *, void *, void *, void *, void *);
typedef void (*void_fn)(void *, void *, void *, void *, void *);

/* The 33 hidden IBVERBS_1.0 versions and how each reports failure. */
static const struct {
	const char *name;
	char kind; /* 'p' NULL+errno, 'e' errno value, 'm' -1+errno, 'v' void,
		    * 'g' zero GUID */
} compat10[] = {
	{ "ibv_get_device_list", 'p' }, { "ibv_free_device_list", 'v' },
	{ "ibv_get_device_name", 'p' }, { "ibv_get_device_guid", 'g' },
	{ "ibv_open_device", 'p' },	{ "ibv_close_device", 'm' },
	{ "ibv_get_async_event", 'm' }, { "ibv_ack_async_event", 'v' },
	{ "ibv_query_device", 'e' },	{ "ibv_query_port", 'e' },
	{ "ibv_query_gid", 'm' },	{ "ibv_query_pkey", 'm' },
	{ "ibv_alloc_pd", 'p' },	{ "ibv_dealloc_pd", 'e' },
	{ "ibv_reg_mr", 'p' },		{ "ibv_dereg_mr", 'e' },
	{ "ibv_create_cq", 'p' },	{ "ibv_get_cq_event", 'm' },
	{ "ibv_ack_cq_events", 'v' },	{ "ibv_resize_cq", 'e' },
	{ "ibv_destroy_cq", 'e' },	{ "ibv_create_srq", 'p' },
	{ "ibv_modify_srq", 'e' },	{ "ibv_query_srq", 'e' },
	{ "ibv_destroy_srq", 'e' },	{ "ibv_create_qp", 'p' },
	{ "ibv_query_qp", 'e' },	{ "ibv_modify_qp", 'e' },
	{ "ibv_destroy_qp", 'e' },	{ "ibv_create_ah", 'p' },
	{ "ibv_destroy_ah", 'e' },	{ "ibv_attach_mcast", 'e' },
	{ "ibv_detach_mcast", 'e' },
};

static void check_compat(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);
	void_fn reg;

	for (size_t i = 0; i < sizeof(compat10) / sizeof(compat10[0]); i++) {
		const char *name = compat10[i].name;
		void *f = dlvsym(h, name, "IBVERBS_1.0");
		void *dflt = dlvsym(h, name, "IBVERBS_1.1");

		CHECK(f, "%s@IBVERBS_1.0 missing", name);
		CHECK(dflt && dflt != f, "%s@@IBVERBS_1.1 must differ", name);
		if (!f)
			continue;
		errno = 0;
		switch (compat10[i].kind) {
		case 'p': {
			void *r = ((ptr_fn)f)(NULL, NULL, NULL, NULL, NULL);

			CHECK(!r && errno == EOPNOTSUPP, "%s: %p errno %d",
			      name, r, errno);
			break;
		}
		case 'e': {
			int r = ((int_fn)f)(NULL, NULL, NULL, NULL, NULL);

			CHECK(r == EOPNOTSUPP, "%s: %d", name, r);
			break;
		}
		case 'm': {
			int r = ((int_fn)f)(NULL, NULL, NULL, NULL, NULL);

			CHECK(r == -1 && errno == EOPNOTSUPP, "%s: %d errno %d",
			      name, r, errno);
			break;
		}
		case 'g': {
			uint64_t g = ((uint64_t(*)(void *))f)(NULL);

			CHECK(g == 0, "%s: %llx", name, (unsigned long long)g);
			break;
		}
		default:
			((void_fn)f)(NULL, NULL, NULL, NULL, NULL);
		}
	}
	reg = (void_fn)dlvsym(h, "ibv_register_driver", "IBVERBS_1.1");
	CHECK(reg, "ibv_register_driver@IBVERBS_1.1 missing");
	if (reg)
		reg((void *)"old-provider", NULL, NULL, NULL, NULL);
	dlclose(h);
}

/* Provider helpers must fail cleanly if anything ever calls them. */
static void check_private(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);
	const char *const errval[] = {
		"ibv_cmd_alloc_pd",   "ibv_cmd_reg_mr",	     "ibv_cmd_create_cq",
		"ibv_cmd_create_qp",  "ibv_cmd_modify_qp",   "ibv_cmd_destroy_qp",
		"ibv_cmd_query_port", "ibv_cmd_get_context", "execute_ioctl",
		"ibv_cmd_query_device_any",
	};
	void *p;
	int r;

	for (size_t i = 0; i < sizeof(errval) / sizeof(errval[0]); i++) {
		int_fn f = (int_fn)dlvsym(h, errval[i], "IBVERBS_PRIVATE_34");

		CHECK(f, "%s missing", errval[i]);
		if (f) {
			r = f(NULL, NULL, NULL, NULL, NULL);
			CHECK(r == EOPNOTSUPP, "%s: %d", errval[i], r);
		}
	}

	p = dlvsym(h, "ibv_cmd_poll_cq", "IBVERBS_PRIVATE_34");
	if (p) {
		errno = 0;
		r = ((int (*)(void *, int, void *))p)(NULL, 4, NULL);
		CHECK(r == -1 && errno == EOPNOTSUPP, "ibv_cmd_poll_cq: %d %d",
		      r, errno);
	}

	p = dlvsym(h, "ibv_cmd_post_send", "IBVERBS_PRIVATE_34");
	if (p) {
		struct ibv_send_wr wr = { 0 }, *bad = NULL;

		r = ((int (*)(void *, void *, void *))p)(NULL, &wr, &bad);
		CHECK(r == EOPNOTSUPP && bad == &wr,
		      "ibv_cmd_post_send: %d bad=%p", r, (void *)bad);
	}

	p = dlvsym(h, "_verbs_init_and_alloc_context", "IBVERBS_PRIVATE_34");
	if (p) {
		void *c;

		errno = 0;
		c = ((void *(*)(void *, int, size_t, void *, uint32_t))p)(
			NULL, -1, 4096, NULL, 0);
		CHECK(!c && errno == EOPNOTSUPP,
		      "_verbs_init_and_alloc_context: %p %d", c, errno);
	}

	p = dlvsym(h, "__ioctl_final_num_attrs", "IBVERBS_PRIVATE_34");
	if (p)
		CHECK(((unsigned (*)(unsigned, void *))p)(7, NULL) == 7,
		      "__ioctl_final_num_attrs(7, NULL)");

	p = dlvsym(h, "ibv_read_ibdev_sysfs_file", "IBVERBS_PRIVATE_34");
	if (p) {
		char buf[32];

		errno = 0;
		r = ((int (*)(char *, size_t, void *, const char *, ...))p)(
			buf, sizeof(buf), NULL, "%s", "node_guid");
		CHECK(r == -1 && errno == ENOENT,
		      "ibv_read_ibdev_sysfs_file: %d %d", r, errno);
	}

	/* Called by every provider constructor; must be harmless. */
	p = dlvsym(h, "verbs_register_driver_34", "IBVERBS_PRIVATE_34");
	CHECK(p, "verbs_register_driver_34 missing");
	if (p)
		((void (*)(const void *))p)(NULL);
	p = dlvsym(h, "__verbs_log", "IBVERBS_PRIVATE_34");
	if (p)
		((void (*)(void *, uint32_t, const char *, ...))p)(
			NULL, 0, "%s\n", "must not print");
	p = dlvsym(h, "verbs_allow_disassociate_destroy", "IBVERBS_PRIVATE_34");
	CHECK(p, "verbs_allow_disassociate_destroy missing");
	dlclose(h);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	check_ours("at start");
	check_compat();
	check_private();
	check_providers();
	if (failures) {
		printf("%d failure(s)\n", failures);
		return 1;
	}
	printf("abi_load: all checks passed\n");
	return 0;
}
