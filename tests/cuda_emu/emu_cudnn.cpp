/* emu_cudnn.cpp: the emulator's cuDNN backend API (cudnn.h says what it checks). Descriptors
 * keep every attribute set on them; Finalize validates the descriptor and, for an operation
 * graph, the graph; heuristics return one engine config, whose plan never finalizes. */
#include "cudnn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

const int kAnyOp = -1, kNoRef = -2;

/* One attribute as the backend documentation defines it: the descriptor it belongs to, its
 * type, how many elements, whether Finalize requires it, what a descriptor element must be. */
struct Rule {
    cudnnBackendAttributeName_t attr;
    cudnnBackendDescriptorType_t owner;
    cudnnBackendAttributeType_t type;
    int64_t min, max;
    bool required;
    int ref;
    const char *name;
};

#define R(attr, owner, type, mn, mx, req, ref)                                                     \
    { attr, CUDNN_BACKEND_##owner##_DESCRIPTOR, CUDNN_TYPE_##type, mn, mx, req, ref, #attr }
#define DESC(k) CUDNN_BACKEND_##k##_DESCRIPTOR
const Rule kRules[] = {
    R(CUDNN_ATTR_POINTWISE_MODE, POINTWISE, POINTWISE_MODE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_POINTWISE_MATH_PREC, POINTWISE, DATA_TYPE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_POINTWISE_AXIS, POINTWISE, INT64, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_ENGINEHEUR_MODE, ENGINEHEUR, HEUR_MODE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, ENGINEHEUR, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(OPERATIONGRAPH)),
    R(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, EXECUTION_PLAN, HANDLE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, EXECUTION_PLAN, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(ENGINECFG)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, OPERATION_POINTWISE, BACKEND_DESCRIPTOR, 1, 1,
      true, DESC(POINTWISE)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, OPERATION_POINTWISE, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, OPERATION_POINTWISE, BACKEND_DESCRIPTOR, 1, 1, false,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, OPERATION_POINTWISE, BACKEND_DESCRIPTOR, 1, 1, false,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, OPERATION_POINTWISE, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, OPERATION_POINTWISE, FLOAT, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, OPERATION_POINTWISE, FLOAT, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, OPERATIONGRAPH, HANDLE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_OPERATIONGRAPH_OPS, OPERATIONGRAPH, BACKEND_DESCRIPTOR, 1, 1 << 20, true, kAnyOp),
    R(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, TENSOR, INT64, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_TENSOR_DATA_TYPE, TENSOR, DATA_TYPE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_TENSOR_DIMENSIONS, TENSOR, INT64, 1, 8, true, kNoRef),
    R(CUDNN_ATTR_TENSOR_STRIDES, TENSOR, INT64, 1, 8, true, kNoRef),
    R(CUDNN_ATTR_TENSOR_UNIQUE_ID, TENSOR, INT64, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_TENSOR_IS_VIRTUAL, TENSOR, BOOLEAN, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_TENSOR_IS_BY_VALUE, TENSOR, BOOLEAN, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, TENSOR, BACKEND_DESCRIPTOR, 1, 1, false, DESC(TENSOR)),
    R(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, VARIANT_PACK, INT64, 0, 1 << 20, true, kNoRef),
    R(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, VARIANT_PACK, VOID_PTR, 0, 1 << 20, true, kNoRef),
    R(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, VARIANT_PACK, VOID_PTR, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_MATMUL_COMP_TYPE, MATMUL, DATA_TYPE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_OPERATION_MATMUL_ADESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_MATMUL_BDESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_MATMUL_CDESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_MATMUL_DESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(MATMUL)),
    R(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1,
      false, DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1,
      false, DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, OPERATION_MATMUL, BACKEND_DESCRIPTOR, 1, 1,
      false, DESC(TENSOR)),
    R(CUDNN_ATTR_REDUCTION_OPERATOR, REDUCTION, REDUCTION_OPERATOR_TYPE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_REDUCTION_COMP_TYPE, REDUCTION, DATA_TYPE, 1, 1, true, kNoRef),
    R(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, REDUCTION, BOOLEAN, 1, 1, false, kNoRef),
    R(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, OPERATION_REDUCTION, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, OPERATION_REDUCTION, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_REDUCTION_DESC, OPERATION_REDUCTION, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(REDUCTION)),
    R(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, OPERATION_RESHAPE, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
    R(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, OPERATION_RESHAPE, BACKEND_DESCRIPTOR, 1, 1, true,
      DESC(TENSOR)),
};
#undef R
#undef DESC

const Rule *rule_of(cudnnBackendAttributeName_t a) {
    for (const Rule &r : kRules)
        if (r.attr == a) return &r;
    return NULL;
}

size_t elem_size(cudnnBackendAttributeType_t t) {
    switch (t) {
    case CUDNN_TYPE_HANDLE:
        return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE:
        return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN:
        return sizeof(bool);
    case CUDNN_TYPE_INT64:
        return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT:
        return sizeof(float);
    case CUDNN_TYPE_VOID_PTR:
        return sizeof(void *);
    case CUDNN_TYPE_POINTWISE_MODE:
        return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE:
        return sizeof(cudnnReduceTensorOp_t);
    case CUDNN_TYPE_HEUR_MODE:
        return sizeof(cudnnBackendHeurMode_t);
    }
    return 0;
}

struct Value {
    bool set = false;
    int64_t count = 0;
    std::vector<unsigned char> bytes;
};

struct Desc {
    cudnnBackendDescriptorType_t kind;
    bool finalized = false;
    bool from_heuristics = false; /* an engine config the heuristics filled */
    Value v[EMU_CUDNN_ATTRIBUTES];

    bool has(cudnnBackendAttributeName_t a) const { return v[a].set; }
    template <typename T> T get(cudnnBackendAttributeName_t a, int64_t i = 0) const {
        T x;
        memcpy(&x, v[a].bytes.data() + i * sizeof(T), sizeof(T));
        return x;
    }
    std::vector<int64_t> ints(cudnnBackendAttributeName_t a) const {
        std::vector<int64_t> r((size_t)v[a].count);
        if (!r.empty()) memcpy(r.data(), v[a].bytes.data(), r.size() * sizeof(int64_t));
        return r;
    }
    Desc *ref(cudnnBackendAttributeName_t a, int64_t i = 0) const {
        return has(a) ? (Desc *)get<cudnnBackendDescriptor_t>(a, i) : NULL;
    }
};

std::set<Desc *> g_live;
std::string g_last;

cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    g_last = buf;
    return st;
}

bool is_op(cudnnBackendDescriptorType_t k) {
    return k == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
           k == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
           k == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
           k == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

/* ---- finalize checks ---- */

std::string dims_str(const std::vector<int64_t> &d) {
    std::string s = "(";
    for (size_t i = 0; i < d.size(); i++) s += (i ? "," : "") + std::to_string(d[i]);
    return s + ")";
}

cudnnStatus_t check_tensor(const Desc &d) {
    const std::vector<int64_t> dim = d.ints(CUDNN_ATTR_TENSOR_DIMENSIONS),
                               st = d.ints(CUDNN_ATTR_TENSOR_STRIDES);
    const int64_t uid = d.get<int64_t>(CUDNN_ATTR_TENSOR_UNIQUE_ID);
    if (dim.size() != st.size())
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor %lld: %zu dims, %zu strides", (long long)uid,
                    dim.size(), st.size());
    for (size_t i = 0; i < dim.size(); i++)
        if (dim[i] < 1 || st[i] < 1)
            return fail(CUDNN_STATUS_BAD_PARAM, "tensor %lld: dims %s strides %s", (long long)uid,
                        dims_str(dim).c_str(), dims_str(st).c_str());
    const int64_t align = d.get<int64_t>(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT);
    if (align < 1 || (align & (align - 1)))
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor %lld: alignment %lld", (long long)uid,
                    (long long)align);
    const bool virt =
        d.has(CUDNN_ATTR_TENSOR_IS_VIRTUAL) && d.get<bool>(CUDNN_ATTR_TENSOR_IS_VIRTUAL);
    const bool byv =
        d.has(CUDNN_ATTR_TENSOR_IS_BY_VALUE) && d.get<bool>(CUDNN_ATTR_TENSOR_IS_BY_VALUE);
    int64_t numel = 1;
    for (int64_t x : dim) numel *= x;
    if (virt && byv)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor %lld: virtual and by value", (long long)uid);
    if (byv && numel != 1)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor %lld: by value with %lld elements",
                    (long long)uid, (long long)numel);
    if (const Desc *r = d.ref(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)) {
        const std::vector<int64_t> rd = r->ints(CUDNN_ATTR_TENSOR_DIMENSIONS);
        const cudnnDataType_t rt = r->get<cudnnDataType_t>(CUDNN_ATTR_TENSOR_DATA_TYPE);
        bool ok = rd.size() == dim.size() && rd[0] == dim[0] + 1 &&
                  (rt == CUDNN_DATA_INT32 || rt == CUDNN_DATA_INT64);
        for (size_t i = 1; ok && i < rd.size(); i++) ok = rd[i] == 1;
        if (!ok)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "tensor %lld %s: ragged offsets %s (want b + 1 int32/int64 entries)",
                        (long long)uid, dims_str(dim).c_str(), dims_str(rd).c_str());
    }
    return CUDNN_STATUS_SUCCESS;
}

std::vector<int64_t> tdims(const Desc *t) { return t->ints(CUDNN_ATTR_TENSOR_DIMENSIONS); }
cudnnDataType_t ttype(const Desc *t) {
    return t->get<cudnnDataType_t>(CUDNN_ATTR_TENSOR_DATA_TYPE);
}

cudnnStatus_t check_pointwise_op(const Desc &d) {
    const Desc *pw = d.ref(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
    const cudnnPointwiseMode_t m = pw->get<cudnnPointwiseMode_t>(CUDNN_ATTR_POINTWISE_MODE);
    const Desc *x = d.ref(CUDNN_ATTR_OPERATION_POINTWISE_XDESC),
               *b = d.ref(CUDNN_ATTR_OPERATION_POINTWISE_BDESC),
               *t = d.ref(CUDNN_ATTR_OPERATION_POINTWISE_TDESC),
               *y = d.ref(CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
    const bool unary = m == CUDNN_POINTWISE_EXP || m == CUDNN_POINTWISE_LOG ||
                       m == CUDNN_POINTWISE_IDENTITY || m == CUDNN_POINTWISE_GEN_INDEX;
    const bool ternary = m == CUDNN_POINTWISE_BINARY_SELECT;
    if (unary == (b != NULL) || ternary != (t != NULL))
        return fail(CUDNN_STATUS_BAD_PARAM, "pointwise mode %d: %s input b, %s input t", (int)m,
                    b ? "with" : "without", t ? "with" : "without");
    const std::vector<int64_t> yd = tdims(y);
    for (const Desc *in : {x, b, t}) {
        if (!in) continue;
        const std::vector<int64_t> id = tdims(in);
        bool ok = id.size() == yd.size();
        for (size_t i = 0; ok && i < id.size(); i++) ok = id[i] == yd[i] || id[i] == 1;
        if (!ok)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "pointwise mode %d: input %s does not broadcast to %s", (int)m,
                        dims_str(id).c_str(), dims_str(yd).c_str());
    }
    const cudnnDataType_t yt = ttype(y);
    const bool cmp = m == CUDNN_POINTWISE_CMP_GE || m == CUDNN_POINTWISE_CMP_LT ||
                     m == CUDNN_POINTWISE_LOGICAL_AND;
    if (cmp != (yt == CUDNN_DATA_BOOLEAN) ||
        (m == CUDNN_POINTWISE_GEN_INDEX && yt != CUDNN_DATA_INT32 && yt != CUDNN_DATA_INT64))
        return fail(CUDNN_STATUS_BAD_PARAM, "pointwise mode %d: output type %d", (int)m, (int)yt);
    if (m == CUDNN_POINTWISE_GEN_INDEX) {
        const int64_t axis =
            pw->has(CUDNN_ATTR_POINTWISE_AXIS) ? pw->get<int64_t>(CUDNN_ATTR_POINTWISE_AXIS) : -1;
        if (axis < 0 || axis >= (int64_t)yd.size())
            return fail(CUDNN_STATUS_BAD_PARAM, "GEN_INDEX axis %lld of a rank %zu tensor",
                        (long long)axis, yd.size());
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_matmul_op(const Desc &d) {
    const std::vector<int64_t> a = tdims(d.ref(CUDNN_ATTR_OPERATION_MATMUL_ADESC)),
                               b = tdims(d.ref(CUDNN_ATTR_OPERATION_MATMUL_BDESC)),
                               c = tdims(d.ref(CUDNN_ATTR_OPERATION_MATMUL_CDESC));
    const size_t r = c.size();
    bool ok = r >= 2 && a.size() == r && b.size() == r && a[r - 2] == c[r - 2] &&
              b[r - 1] == c[r - 1] && a[r - 1] == b[r - 2];
    for (size_t i = 0; ok && i + 2 < r; i++)
        ok = c[i] == (a[i] > b[i] ? a[i] : b[i]) && c[i] % a[i] == 0 && c[i] % b[i] == 0;
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, "matmul %s x %s -> %s", dims_str(a).c_str(),
                    dims_str(b).c_str(), dims_str(c).c_str());
    for (cudnnBackendAttributeName_t o : {CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
                                          CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
                                          CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC}) {
        const Desc *t = d.ref(o);
        if (!t) continue;
        const std::vector<int64_t> od = tdims(t);
        bool good = od.size() == r && od[0] == c[0] && ttype(t) == CUDNN_DATA_INT32;
        for (size_t i = 1; good && i < r; i++) good = od[i] == 1;
        if (!good)
            return fail(CUDNN_STATUS_BAD_PARAM, "matmul size override %s for %s",
                        dims_str(od).c_str(), dims_str(c).c_str());
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_reduction_op(const Desc &d) {
    const std::vector<int64_t> x = tdims(d.ref(CUDNN_ATTR_OPERATION_REDUCTION_XDESC)),
                               y = tdims(d.ref(CUDNN_ATTR_OPERATION_REDUCTION_YDESC));
    bool ok = x.size() == y.size();
    for (size_t i = 0; ok && i < x.size(); i++) ok = y[i] == x[i] || y[i] == 1 || x[i] % y[i] == 0;
    return ok ? CUDNN_STATUS_SUCCESS
              : fail(CUDNN_STATUS_BAD_PARAM, "reduction %s -> %s", dims_str(x).c_str(),
                     dims_str(y).c_str());
}

cudnnStatus_t check_reshape_op(const Desc &d) {
    const std::vector<int64_t> x = tdims(d.ref(CUDNN_ATTR_OPERATION_RESHAPE_XDESC)),
                               y = tdims(d.ref(CUDNN_ATTR_OPERATION_RESHAPE_YDESC));
    int64_t nx = 1, ny = 1;
    for (int64_t v : x) nx *= v;
    for (int64_t v : y) ny *= v;
    return nx == ny ? CUDNN_STATUS_SUCCESS
                    : fail(CUDNN_STATUS_BAD_PARAM, "reshape %s -> %s", dims_str(x).c_str(),
                           dims_str(y).c_str());
}

/* Unique ids; a virtual tensor written by exactly one op and read by one at least; a non-virtual
 * one written at most once, a by-value one never. */
cudnnStatus_t check_graph(const Desc &g) {
    std::map<int64_t, const Desc *> by_uid;
    std::map<const Desc *, int> writes, reads;
    std::set<const Desc *> ops;
    auto note = [&](const Desc *t, bool out) -> cudnnStatus_t {
        const int64_t uid = t->get<int64_t>(CUDNN_ATTR_TENSOR_UNIQUE_ID);
        auto it = by_uid.find(uid);
        if (it != by_uid.end() && it->second != t)
            return fail(CUDNN_STATUS_BAD_PARAM, "two tensors with unique id %lld", (long long)uid);
        by_uid[uid] = t;
        (out ? writes : reads)[t]++;
        if (const Desc *r = t->ref(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)) {
            const int64_t ru = r->get<int64_t>(CUDNN_ATTR_TENSOR_UNIQUE_ID);
            auto rt = by_uid.find(ru);
            if (rt != by_uid.end() && rt->second != r)
                return fail(CUDNN_STATUS_BAD_PARAM, "two tensors with unique id %lld",
                            (long long)ru);
            by_uid[ru] = r;
            reads[r]++;
        }
        return CUDNN_STATUS_SUCCESS;
    };
    for (int64_t i = 0; i < g.v[CUDNN_ATTR_OPERATIONGRAPH_OPS].count; i++) {
        const Desc *op = g.ref(CUDNN_ATTR_OPERATIONGRAPH_OPS, i);
        if (!ops.insert(op).second)
            return fail(CUDNN_STATUS_BAD_PARAM, "operation %lld listed twice", (long long)i);
        for (int a = 0; a < EMU_CUDNN_ATTRIBUTES; a++) {
            const Rule *r = rule_of((cudnnBackendAttributeName_t)a);
            if (!r || r->owner != op->kind || r->ref != CUDNN_BACKEND_TENSOR_DESCRIPTOR ||
                !op->has((cudnnBackendAttributeName_t)a))
                continue;
            const bool out = a == CUDNN_ATTR_OPERATION_POINTWISE_YDESC ||
                             a == CUDNN_ATTR_OPERATION_MATMUL_CDESC ||
                             a == CUDNN_ATTR_OPERATION_REDUCTION_YDESC ||
                             a == CUDNN_ATTR_OPERATION_RESHAPE_YDESC;
            cudnnStatus_t st = note(op->ref((cudnnBackendAttributeName_t)a), out);
            if (st != CUDNN_STATUS_SUCCESS) return st;
        }
    }
    for (const auto &u : by_uid) {
        const Desc *t = u.second;
        const bool virt =
            t->has(CUDNN_ATTR_TENSOR_IS_VIRTUAL) && t->get<bool>(CUDNN_ATTR_TENSOR_IS_VIRTUAL);
        const bool byv =
            t->has(CUDNN_ATTR_TENSOR_IS_BY_VALUE) && t->get<bool>(CUDNN_ATTR_TENSOR_IS_BY_VALUE);
        const int w = writes.count(t) ? writes[t] : 0, r = reads.count(t) ? reads[t] : 0;
        if ((virt && (w != 1 || r < 1)) || (!virt && w > 1) || (byv && w))
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "tensor %lld (%s): written by %d operations, read by %d",
                        (long long)u.first,
                        virt  ? "virtual"
                        : byv ? "by value"
                              : "memory",
                        w, r);
    }
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

struct emu_cudnn_context {
    int unused;
};

/* MT_EMU_CUDNN_VERSION=91400 (say) fakes another release, so the version guards of
 * kernels/cuda/attention_cudnn.cu run here (op_cuda_emu_attention_cudnn_v*) */
size_t cudnnGetVersion(void) {
    const char *v = getenv("MT_EMU_CUDNN_VERSION");
    if (!v || !*v) return CUDNN_VERSION;
    char *end = NULL;
    const unsigned long n = strtoul(v, &end, 10);
    if (*end || n < 90000 || n > 99999) {
        fprintf(stderr, "emulator: MT_EMU_CUDNN_VERSION=%s: expected a cuDNN 9 version (91400)\n",
                v);
        exit(2);
    }
    return n;
}

const char *cudnnGetErrorString(cudnnStatus_t st) {
    switch (st) {
    case CUDNN_STATUS_SUCCESS:
        return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
        return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM:
        return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR:
        return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED:
        return "CUDNN_STATUS_EXECUTION_FAILED";
    }
    return "CUDNN_STATUS_?";
}

void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (max_size) snprintf(message, max_size, "%s", g_last.c_str());
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    static emu_cudnn_context ctx;
    *handle = &ctx;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    (void)handle;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    (void)handle, (void)stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *descriptor) {
    if (type < 0 || type >= EMU_CUDNN_DESCRIPTOR_KINDS)
        return fail(CUDNN_STATUS_BAD_PARAM, "descriptor type %d", (int)type);
    Desc *d = new Desc();
    d->kind = type;
    g_live.insert(d);
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
    Desc *d = (Desc *)descriptor;
    if (!g_live.erase(d)) return fail(CUDNN_STATUS_BAD_PARAM, "destroy of an unknown descriptor");
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *elements) {
    Desc *d = (Desc *)descriptor;
    if (!g_live.count(d)) return fail(CUDNN_STATUS_BAD_PARAM, "set on an unknown descriptor");
    const Rule *r = rule_of(name);
    if (!r || r->owner != d->kind)
        return fail(CUDNN_STATUS_BAD_PARAM, "attribute %d does not belong to descriptor type %d",
                    (int)name, (int)d->kind);
    if (d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: descriptor already finalized", r->name);
    if (type != r->type)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: attribute type %d", r->name, (int)type);
    if (count < r->min || count > r->max || (count && !elements))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %lld elements", r->name, (long long)count);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++) {
            Desc *e = ((Desc *const *)elements)[i];
            if (!g_live.count(e) || !e->finalized)
                return fail(CUDNN_STATUS_BAD_PARAM, "%s[%lld]: not a finalized descriptor", r->name,
                            (long long)i);
            if ((r->ref >= 0 && e->kind != r->ref) || (r->ref == kAnyOp && !is_op(e->kind)))
                return fail(CUDNN_STATUS_BAD_PARAM, "%s[%lld]: descriptor type %d", r->name,
                            (long long)i, (int)e->kind);
        }
    Value &v = d->v[name];
    v.set = true;
    v.count = count;
    const size_t nb = elem_size(type) * (size_t)count;
    v.bytes.assign((const unsigned char *)elements, (const unsigned char *)elements + nb);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
    Desc *d = (Desc *)descriptor;
    if (!g_live.count(d)) return fail(CUDNN_STATUS_BAD_PARAM, "finalize of an unknown descriptor");
    if (d->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "finalized twice");
    for (const Rule &r : kRules)
        if (r.owner == d->kind && r.required && !d->has(r.attr))
            return fail(CUDNN_STATUS_BAD_PARAM, "finalize without %s", r.name);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    switch (d->kind) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        st = check_tensor(*d);
        break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        st = check_pointwise_op(*d);
        break;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        st = check_matmul_op(*d);
        break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        st = check_reduction_op(*d);
        break;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        st = check_reshape_op(*d);
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        st = check_graph(*d);
        break;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
        return fail(CUDNN_STATUS_BAD_PARAM, "engine configs come from the heuristics");
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        if (!d->ref(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)->from_heuristics)
            return fail(CUDNN_STATUS_BAD_PARAM, "a plan's engine config must come from heuristics");
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "the CPU emulator has no cuDNN engines (tests/cuda_emu/cudnn.h)");
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        if (d->v[CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS].count !=
            d->v[CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS].count)
            return fail(CUDNN_STATUS_BAD_PARAM, "variant pack: ids and pointers differ in number");
        break;
    default:
        break;
    }
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = true;
    return st;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *elements) {
    Desc *d = (Desc *)descriptor;
    if (!g_live.count(d) || !d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "get from a descriptor that is not finalized");
    if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS && d->kind == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR &&
        type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        *count = 1; /* one engine config; its plan will not finalize */
        if (requested >= 1 && elements) {
            Desc *cfg = ((Desc **)elements)[0];
            if (!g_live.count(cfg) || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                return fail(CUDNN_STATUS_BAD_PARAM, "heuristics results into a non engine config");
            cfg->finalized = cfg->from_heuristics = true;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "attribute %d is not emulated", (int)name);
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t variant_pack) {
    (void)handle, (void)plan, (void)variant_pack;
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "the CPU emulator has no cuDNN engines");
}
