"""Static checks of a candidate's source, before any of it runs.

Each check is a guard flag. They are deliberately broad: a kernel file has no business
reading timers, walking the garbage collector or other frames, patching modules,
starting threads or processes, exiting the process, reading the environment, or
tampering with the launch counters. Patterns run over the whole text less its comments,
so C/CUDA kernel source inside strings is checked too.

One guard is about Python calls alone and looks at the syntax tree instead: `reference_call`
(a call of the task's `Model`, `get_inputs` or `get_init_inputs`, or of the reference's
`forward` through `super()`). Those names mean nothing in C or CUDA source, and a docstring or
string that mentions them (an extracted task's "Region linear_relu of Model ...") calls nothing.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from foundry.evaluate.backends import BackendSpec
from foundry.evaluate.movement_ops import MOVEMENT_OPS

PATTERNS: dict[str, tuple[str, ...]] = {
    "timer_tampering": (
        r"^\s*(import|from)\s+(time|timeit)\b", r"\bperf_counter", r"\bprocess_time\b",
        r"\bmonotonic(_ns)?\b", r"\btime_ns\b", r"\bclock_gettime\b", r"\bgettimeofday\b",
        r"\brdtscp?\b", r"\bclock\s*\(\s*\)", r"\bdatetime\b", r"\belapsed_time\b",
        r"__import__\s*\(\s*['\"](time|timeit)['\"]", r"\bEvent\s*\([^)]*enable_timing"),
    "introspection": (
        r"\bgc\s*\.\s*get_(objects|referrers|referents)", r"^\s*(import|from)\s+gc\b",
        r"\b_getframe\b", r"\bcurrentframe\b", r"\binspect\s*\.\s*(stack|getouterframes|getmembers)",
        r"\bf_(back|locals|globals|builtins|code)\b", r"\btb_frame\b", r"__subclasses__",
        r"/proc/", r"\bpythonapi\b", r"\bstring_at\b", r"\bmemmove\b", r"CDLL\s*\(\s*None",
        r"\bptrace\b", r"\bprocess_vm_(read|write)v\b", r"__globals__", r"__closure__",
        r"\bsettrace\b", r"\bsetprofile\b", r"\baddaudithook\b", r"\bsys\s*\.\s*modules\b"),
    "process_control": (
        r"\b(sys\s*\.\s*exit|os\s*\.\s*_exit|_exit|exit|quit|abort)\s*\(", r"\bos\s*\.\s*kill",
        r"\bkillpg\b", r"^\s*(import|from)\s+(signal|subprocess|multiprocessing|pty)\b",
        r"\bsignal\s*\.\s*\w+", r"\bos\s*\.\s*(fork|forkpty|system|popen|exec\w*|spawn\w*|setsid|setpgid)\b",
        r"\bfork\s*\(", r"\batexit\b", r"\bsetrlimit\b", r"\braise\s+SystemExit\b", r"\bSystemExit\s*\("),
    "threads": (
        r"^\s*(import|from)\s+(threading|_thread|concurrent|asyncio)\b", r"\bThread\s*\(",
        r"\bThreadPool", r"\bstart_new_thread\b"),
    "env_access": (r"\benviron\b", r"\bgetenv\b", r"\bputenv\b"),
    "torch_patching": (
        r"\buse_deterministic_algorithms\b", r"\bfill_uninitialized_memory\b", r"\btorch\s*\.\s*_C\b",
        r"\btorch\s*\.\s*library\b", r"__torch_function__", r"__torch_dispatch__", r"DispatchMode",
        r"TorchFunctionMode", r"\btorch\s*\.\s*overrides\b", r"\b_dispatch\b", r"set_flush_denormal", r"_python_dispatch", r"_pop_mode", r"mode_stack",
        r"are_deterministic_algorithms_enabled",
        r"\btorch\s*\.\s*_dynamo\b", r"\bimportlib\b", r"\breload\s*\(", r"\b__builtins__\b",
        r"^\s*(import|from)\s+builtins\b", r"\bsetattr\s*\(", r"\bdelattr\s*\("),
    "file_access": (
        r"\bopen\s*\([^)]*,\s*['\"][^'\"]*[wax+]", r"\bwrite_(text|bytes)\s*\(", r"\bfopen\s*\(",
        r"^\s*(import|from)\s+shutil\b", r"\bos\s*\.\s*(remove|unlink|rename|replace|chmod|chown|symlink|"
        r"link|truncate|rmdir|makedirs|mkdir|open)\b", r"\bunlink\s*\(", r"\bsite-packages\b"),
    "obfuscation": (
        r"\bexec\s*\(", r"\beval\s*\(", r"\b__import__\s*\(", r"(?<![\w.])compile\s*\(",
        r"\bgetattr\s*\([^,()]+,(?!\s*['\"][\w.]*['\"]\s*[,)])", r"\bvars\s*\(", r"\bglobals\s*\(\s*\)",
        r"\blocals\s*\(\s*\)", r"^\s*(import|from)\s+(base64|codecs|marshal|pickle|zlib|types)\b",
        r"\bchr\s*\(\s*\d", r"\bbytes\.fromhex\b", r"\.__dict__\b"),
    "judge_access": (r"\bfoundry\s*\.\s*evaluate\b", r"^\s*from\s+foundry\s+import\s+[^\n]*\bevaluate\b",
                     r"\bfoundry\s*\.\s*tasks\b", r"_timing\b"),
    "launch_tampering": (r"\brecord_launch\b", r"\breset_launches\b", r"\b_launches\b",
                         r"\blaunches\s*\("),
    # compiling at run time: the compiler's kernels would do the work the candidate claims
    # (Inductor's runtime helpers, which generated kernels import, stay allowed; its
    # autotuner, its code caches and loaders do not). compile_guard.py is the runtime layer.
    "runtime_compile": (
        r"\btorch\s*\.\s*compile(r)?\b", r"^\s*from\s+torch\s+import\s+[^\n]*\bcompiler?\b", r"\b_dynamo\b",
        r"\b_inductor\b(?!\s*\.\s*runtime\b)", r"\bcompile_fx\w*", r"\baot_(compile|autograd|function)\b",
        r"\btorch\s*\.\s*(jit|export)\b", r"['\"](compile|compiler|_dynamo|_inductor)['\"]",
        r"\b(Cpp|CppPythonBindings|CppWrapper|Py|CUDA|ROCm|Halide|XPU|Triton|CUTLASS)CodeCache\b",
        r"\b(AsyncCompile|async_compile|cpp_pybinding|load_pybinding|load_by_key_path|standalone_compile)\b",
        r"\baoti_\w+", r"\btriton_heuristics\b", r"\bCachingAutotuner\b", r"\bautotune_select_algorithm\b",
        r"\bAlgorithmSelectorCache\b", r"\bbenchmark_all_configs\b", r"\bcoordinate_descent\w*"),
}


# what a flag's evidence means, where the matched text alone does not say it
WHY = {
    "runtime_compile": "compiles at run time: torch.compile, dynamo, Inductor's compile entry points, code "
                       "loaders or autotuner would build the kernels that run; a candidate launches its own "
                       "(Inductor-generated source pasted in as plain kernels is fine)",
}

# compute done by another library instead of the candidate's kernels (like torch_compute)
FOREIGN_COMPUTE = (
    r"^\s*(import|from)\s+(numpy|scipy|numba|jax|jaxlib|cupy|tensorflow|sklearn|numexpr|pandas|mkl)\b",
    r"\.numpy\s*\(", r"__array__", r"\.tolist\s*\(", r"\bcblas_\w+", r"\b[sdhcz]gemm_?\s*\(",
    r"\bdlopen\b", r"\bdlsym\b",
    # C++ built against torch's headers and libraries (foundry.kernels.c torch_headers=True):
    # only ATen's vector types (at::vec), its 16-bit float types (at::BFloat16, at::Half: plain
    # values with their conversions) and c10's helpers; ATen's operators and the BLAS, MKL,
    # oneDNN and vector-math routines linked with it are library compute
    r"\bat::(?!vec::|BFloat16\b|Half\b)\w+", r"\b(mkl|MKL|dnnl|mkldnn|vml|vsl)_\w+", r"\bv[sdcz][A-Z][a-z]\w*\s*\(")

# "tf32" anywhere (input_precision="tf32", allow_tf32=True) but not Triton's "tf32x3", the
# split float32 product that keeps float32's tolerance (foundry/templates/dot_precision.py)
PRECISION = (r"\.half\s*\(", r"\.bfloat16\s*\(", r"\bfloat16\b", r"\bbfloat16\b", r"\btorch\s*\.\s*half\b",
             r"tf32(?!x3)", r"\b__half\b", r"\b__nv_bfloat16\b", r"\b_Float16\b", r"-ffast-math",
             r"-Ofast", r"\bfast_math\b", r"\bfloat8", r"\bfp8\b", r"\bamp\b", r"\bautocast\b")

# torch functions a kernel file may call: allocation, views, copies and metadata (the
# judge's one list of them, by aten name, and torch's own API around tensors)
TORCH_ALLOWED = MOVEMENT_OPS | frozenset("""
tensor as_tensor from_numpy is_tensor numel device dtype Size manual_seed no_grad
inference_mode enable_grad set_grad_enabled finfo iinfo result_type promote_types
broadcast_shapes is_floating_point is_complex get_num_threads get_default_dtype Generator
set_num_threads
""".split())

# methods that compute (on tensors); calling them in a kernel file is a PyTorch rewrite
COMPUTE_METHODS = frozenset("""
matmul mm bmm addmm baddbmm einsum relu relu_ softmax log_softmax sigmoid tanh gelu silu exp
log sum mean prod amax amin max min argmax argmin std var norm cumsum cumprod sort topk
conv1d conv2d conv3d conv_transpose2d linear layer_norm batch_norm group_norm dropout
clamp clamp_ clip where masked_fill pow sqrt rsqrt abs logsumexp maximum minimum
""".split())

# library GEMM/convolution calls: left to the dynamic check, which allows them when the
# task's reference uses them too and has other work left for the candidate's kernels
LIBRARY_FUNCS = frozenset("""
mm bmm matmul addmm baddbmm einsum linear conv1d conv2d conv3d conv_transpose1d
conv_transpose2d conv_transpose3d
""".split())
LIBRARY_LAYERS = frozenset({"Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
                            "ConvTranspose2d", "ConvTranspose3d"})

NN_LAYER_OK = frozenset({"Module", "Parameter", "ParameterList", "ParameterDict", "ModuleList",
                         "ModuleDict", "Buffer", "Identity"})


@dataclass(frozen=True)
class StaticReport:
    flags: tuple = ()
    reasons: dict = field(default_factory=dict)  # flag -> first evidence
    syntax_error: str | None = None


def without_comments(source: str) -> str:
    """`source` with every Python comment blanked out (same lines and columns). The
    patterns are searched in this: a comment never runs (the judge compiles the source
    text itself, so no coding cookie can turn a comment into code), and a kernel file's
    comments may well name what they must not call ("# faster than torch.compile")."""
    try:
        comments = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    for t in comments:
        (row, start), (_, end) = t.start, t.end
        line = lines[row - 1]
        lines[row - 1] = line[:start] + " " * (end - start) + line[end:]
    return "".join(lines)


def _find(patterns, text: str) -> str | None:
    for p in patterns:
        m = re.search(p, text, re.M)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            return f"line {line}: {m.group(0).strip()[:60]!r}"
    return None


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# the task file's own names: calling one in a kernel file runs the reference (or draws its inputs)
REFERENCE_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs"})


def reference_call(tree: ast.AST) -> str | None:
    """The first call in `tree` of the task's reference: `Model(...)`, `get_inputs()`,
    `get_init_inputs()` (by name or as an attribute, `ref.Model(...)`), or the reference's
    forward reached through `super()` or the class itself (`super().forward(x)`,
    `Model.forward(self, x)`); None when there is none. Every node is walked, Triton
    kernel bodies too (the interpreter runs them as Python)."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in REFERENCE_NAMES:
                hits.append((node.lineno, f"{ast.unparse(f)[:50]}(...)"))
        elif isinstance(node, ast.Attribute) and node.attr == "forward":
            v = node.value
            via_super = isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super"
            via_class = isinstance(v, ast.Name) and v.id == "Model"
            if via_super or via_class:
                hits.append((node.lineno, ast.unparse(node)[:50]))
    if not hits:
        return None
    line, what = min(hits)
    return f"line {line}: {what}"


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> module path
        self.modules: set[str] = set()
        self.compute: list[str] = []
        self.fallback: list[str] = []
        self.patched: list[str] = []
        self.layers: dict[str, str] = {}  # self.<attr> assigned an nn layer -> its class name
        self.layer_calls: list[str] = []
        self._fn_stack: list[str] = []
        self._args: list[set] = []

    # imports ---------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self.modules.add(a.asname or a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            self.modules.add(a.asname or a.name)

    def _resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    # functions -------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            d = dotted_name(dec.func if isinstance(dec, ast.Call) else dec) or ""
            if self._resolve(d).startswith("triton"):
                return  # a Triton kernel body: tl.* calls are the kernel itself
        self._fn_stack.append(node.name)
        a = node.args
        self._args.append({x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} - {"self"})
        self.generic_visit(node)
        self._fn_stack.pop()
        self._args.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _in_init(self) -> bool:
        return "__init__" in self._fn_stack

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t)
            d = dotted_name(t) if isinstance(t, ast.Attribute) else None
            if d and d.startswith("self.") and isinstance(node.value, ast.Call):
                fn = dotted_name(node.value.func) or ""
                full = self._resolve(fn)
                if full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] not in NN_LAYER_OK \
                        and not full.startswith("torch.nn.functional"):
                    self.layers[d[5:]] = full.rsplit(".", 1)[-1]
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def _check_target(self, t: ast.AST) -> None:
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = t
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.modules:
                self.patched.append(f"line {t.lineno}: assignment into module {root.id!r}")
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._check_target(e)

    def visit_Try(self, node: ast.Try) -> None:
        for h in node.handlers:
            for sub in ast.walk(ast.Module(body=h.body, type_ignores=[])):
                if isinstance(sub, (ast.Call, ast.BinOp)) and self._is_compute(sub):
                    self.fallback.append(f"line {h.lineno}: except handler computes with torch")
                    break
                if isinstance(sub, ast.Return) and sub.value is not None:
                    self.fallback.append(f"line {h.lineno}: except handler returns a value")
                    break
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _is_compute(self, node: ast.AST) -> str:
        """"" (no compute), "library" (a GEMM/convolution call) or "torch" (anything else)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "library"
        if not isinstance(node, ast.Call):
            return ""
        d = dotted_name(node.func)
        if d:
            full = self._resolve(d)
            name = full.rsplit(".", 1)[-1]
            if full.startswith(("torch.nn.functional.", "torch.ops.", "torch.linalg.", "torch.fft.",
                                "torch.special.")):
                return "library" if name in LIBRARY_FUNCS else "torch"
            if full.startswith("torch.") and full.count(".") == 1 and full[6:] not in TORCH_ALLOWED:
                return "library" if name in LIBRARY_FUNCS else "torch"
            if full.startswith("self.") and full[5:] in self.layers:
                return "library" if self.layers[full[5:]] in LIBRARY_LAYERS else "torch"
        if (isinstance(node.func, ast.Attribute) and node.func.attr in COMPUTE_METHODS
                and isinstance(node.func.value, ast.Name) and self._args
                and node.func.value.id in self._args[-1]):
            # x.relu(), a.matmul(b) on a forward argument
            return "library" if node.func.attr in LIBRARY_FUNCS else "torch"
        return ""

    def visit_Call(self, node: ast.Call) -> None:
        if not self._in_init() and self._is_compute(node) == "torch":
            self.compute.append(f"line {node.lineno}: {ast.unparse(node.func)[:50]}")
        self.generic_visit(node)


def check_source(source: str, *, backend: BackendSpec, allow_torch_ops: bool = False,
                 allow_precision_drop: bool = False, task_source: str = "",
                 device_patterns: dict | None = None) -> StaticReport:
    """Run every static guard on a candidate source; returns the flags that fired."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return StaticReport(syntax_error=f"SyntaxError: {e.msg} (line {e.lineno})")
    reasons: dict[str, str] = {}
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)):
        reasons["no_model_new"] = "no class ModelNew"
    patterns = {k: list(v) for k, v in PATTERNS.items()}
    for extra in (backend.extra_patterns, device_patterns or {}):
        for flag, pats in extra.items():
            patterns.setdefault(flag, []).extend(pats)
    precision = list(patterns.pop("precision_drop", [])) + list(PRECISION)
    code = without_comments(source)
    for flag, pats in patterns.items():
        hit = _find(pats, code)
        if hit:
            reasons[flag] = f"{hit} ({WHY[flag]})" if flag in WHY else hit
    if not allow_precision_drop:
        hit = _find(precision, code)
        if hit and not _find(precision, without_comments(task_source)):
            reasons["precision_drop"] = hit
    hit = reference_call(tree)
    if hit:
        reasons["reference_call"] = hit
    v = _Visitor()
    v.visit(tree)
    if v.patched:
        reasons["monkeypatch"] = v.patched[0]
    if v.fallback:
        reasons["torch_fallback"] = v.fallback[0]
    if not allow_torch_ops:
        missing = [p for p in backend.kernel_patterns if not re.search(p, code, re.M)]
        if missing:
            reasons["no_kernel"] = f"no {backend.name} kernel found (missing pattern {missing[0]!r})"
        if v.compute:
            reasons["torch_compute"] = v.compute[0]
        hit = _find(FOREIGN_COMPUTE, code)
        if hit:
            reasons["foreign_compute"] = hit
    return StaticReport(flags=tuple(sorted(reasons)), reasons=reasons)
