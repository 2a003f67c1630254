"""Small models covering every op family, shared by the C and Triton correctness tests.

Each case: (name, forward body using xs, init body, init args, inputs expression)."""

X = "[torch.randn(4, 33)]"
X3 = "[torch.randn(3, 10, 7)]"
X4 = "[torch.randn(2, 6, 5, 4)]"

UNARY = ["torch.relu(x)", "F.leaky_relu(x, 0.2)", "F.gelu(x)", "F.gelu(x, approximate='tanh')",
         "torch.sigmoid(x)", "torch.tanh(x)", "F.silu(x)", "F.mish(x)", "F.hardswish(x)",
         "F.hardsigmoid(x)", "F.hardtanh(x, -0.5, 0.7)", "F.elu(x, alpha=0.9)", "torch.selu(x)",
         "F.softplus(x)", "F.softplus(x, beta=2.0, threshold=1.0)", "F.softsign(x)",
         "torch.clamp(x, min=-0.3, max=0.4)", "torch.exp(x)", "torch.abs(x)", "-x", "F.relu6(x * 4)",
         "torch.sqrt(torch.abs(x) + 0.1)", "torch.rsqrt(torch.abs(x) + 0.1)", "torch.log(torch.abs(x) + 0.5)",
         "torch.reciprocal(x.abs() + 1.0)", "x ** 2", "torch.pow(x, 3)", "torch.maximum(x, x * 0.5)",
         "torch.minimum(x, torch.sigmoid(x))", "2.0 - x / 3.0", "x * torch.sigmoid(x) + 1.0"]

CASES = [(f"pw{i}", f"x = xs[0]\nreturn {e}", "pass", "[]", X) for i, e in enumerate(UNARY)]
CASES += [
    ("bias_channel", "return torch.relu(xs[0]) + self.b", "self.b = nn.Parameter(torch.randn(6, 1, 1))", "[]", X4),
    ("bias_last", "return F.gelu(xs[0] + self.b) * 2.0", "self.b = nn.Parameter(torch.randn(33))", "[]", X),
    ("two_inputs", "return (xs[0] - xs[1]) * (xs[0] - xs[1])", "pass", "[]", "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("mask", "return torch.cumsum(xs[0] * xs[1], dim=1)", "pass", "[]", "[torch.randn(4, 33), torch.rand(4, 33) > 0.5]"),
    ("linear_chain", "return torch.tanh(self.l(xs[0])) * 0.5 + 1.0", "self.l = nn.Linear(33, 20)", "[]", X),
    ("conv_chain", "y = self.c(xs[0])\nreturn F.hardswish(y) - 0.25", "self.c = nn.Conv2d(6, 8, 3, padding=1)", "[]", X4),
]
for kind in ["sum", "mean", "amax", "amin", "logsumexp", "argmax", "argmin"]:
    for dim, inp, tag in [(-1, X, "last"), (1, X3, "mid"), (0, X3, "first")]:
        CASES.append((f"{kind}_{tag}", f"return torch.{kind}(xs[0], dim={dim})", "pass", "[]", inp))
CASES += [
    ("max_values", "return torch.max(xs[0], dim=1)[0] * 2.0", "pass", "[]", X3),
    ("sum_keep_post", "return torch.sigmoid(torch.sum(torch.relu(xs[0]), dim=1, keepdim=True))", "pass", "[]", X3),
    ("sum_dims", "return xs[0].sum(dim=(2, 3))", "pass", "[]", X4),
    ("norm2", "return torch.norm(xs[0], p=2, dim=1)", "pass", "[]", X),
    ("prod", "return torch.prod(xs[0] * 0.5 + 1.0, dim=1)", "pass", "[]", X),
    ("softmax_last", "return torch.softmax(xs[0] * 3.0, dim=-1)", "pass", "[]", X),
    ("softmax_mid", "return torch.softmax(xs[0], dim=1)", "pass", "[]", X3),
    ("log_softmax", "return F.log_softmax(xs[0], dim=1) + 1.0", "pass", "[]", X),
    ("layernorm", "return self.n(xs[0])", "self.n = nn.LayerNorm(7)", "[]", X3),
    ("layernorm2d", "return torch.relu(self.n(xs[0]))", "self.n = nn.LayerNorm([5, 4])", "[]", X4),
    ("groupnorm", "return self.n(xs[0] + 1.0)", "self.n = nn.GroupNorm(3, 6)", "[]", X4),
    ("groupnorm_bias", "return torch.tanh(self.n(torch.relu(xs[0]) + self.b))",
     "self.n = nn.GroupNorm(2, 6)\nself.b = nn.Parameter(torch.randn(6, 1, 1))", "[]", X4),
    ("instancenorm", "return self.n(xs[0]) / 2.0", "self.n = nn.InstanceNorm2d(6)", "[]", X4),
    ("rmsnorm", "return self.n(xs[0])", "self.n = nn.RMSNorm(33)", "[]", X),
    ("cumsum", "return torch.cumsum(xs[0], dim=1)", "pass", "[]", X),
    ("cumsum_mid", "return torch.cumsum(xs[0], dim=1)", "pass", "[]", X3),
    ("cumprod", "return torch.cumprod(xs[0] * 0.1 + 1.0, dim=-1)", "pass", "[]", X),
    ("cumsum_reverse", "return torch.cumsum(xs[0].flip(1), 1).flip(1)", "pass", "[]", X),
]

BN_INIT = """self.bn = nn.BatchNorm2d(6)
with torch.no_grad():
    self.bn.running_mean.uniform_(-0.5, 0.5)
    self.bn.running_var.uniform_(0.5, 1.5)
    self.bn.weight.uniform_(0.5, 1.5)
self.bn.eval()"""
CASES += [
    ("bn_module_eval", "return torch.relu(self.bn(xs[0]))", BN_INIT, "[]", X4),
    ("bn_functional", "return F.batch_norm(xs[0], self.rm, self.rv, self.w, None, training=False, eps=1e-3)",
     "self.register_buffer('rm', torch.randn(6))\nself.register_buffer('rv', torch.rand(6) + 0.5)\n"
     "self.w = nn.Parameter(torch.rand(6))", "[]", X4),
    ("bn1d_functional", "return torch.tanh(F.batch_norm(xs[0], self.rm, self.rv, None, self.b, training=False))",
     "self.register_buffer('rm', torch.randn(33))\nself.register_buffer('rv', torch.rand(33) + 0.5)\n"
     "self.b = nn.Parameter(torch.randn(33))", "[]", X),
    ("max_values_attr", "return torch.max(xs[0], dim=1).values", "pass", "[]", X3),
    ("argmin_indices_attr", "return torch.min(xs[0], dim=2).indices", "pass", "[]", X3),
    ("l2_normalize", "x = xs[0]\nreturn x / torch.linalg.vector_norm(x, ord=2, dim=1, keepdim=True).clamp_min(1e-12)",
     "pass", "[]", X),
    ("mse_rows", "return F.mse_loss(xs[0], xs[1], reduction='none').mean(dim=1)", "pass", "[]",
     "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("slice_view", "x = xs[0][:, 1:]\nreturn torch.cumsum(x.reshape(4, -1), dim=1)", "pass", "[]", X),
]
CASES += [
    ("smooth_l1_rows", "return F.smooth_l1_loss(xs[0], xs[1], reduction='none', beta=0.5).mean(dim=1)", "pass",
     "[]", "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("huber_rows", "return F.huber_loss(xs[0], xs[1], reduction='none', delta=0.7).sum(dim=1)", "pass", "[]",
     "[torch.randn(4, 33), torch.randn(4, 33)]"),
]
CASES += [
    ("kl_div_log_target", "return F.kl_div(F.log_softmax(xs[0], dim=1), F.log_softmax(xs[1], dim=1),"
     " reduction='none', log_target=True).sum(dim=1)", "pass", "[]", "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("cosine_rows", "return 1.0 - F.cosine_similarity(xs[0], xs[1], dim=1, eps=1e-6)", "pass", "[]",
     "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("cosine_mid_with_zero_rows", "return F.cosine_similarity(xs[0], xs[1], dim=1)", "pass", "[]",
     "[torch.cat([torch.zeros(1, 10, 7), torch.randn(2, 10, 7)]), torch.randn(3, 10, 7)]"),
]
X5 = "[torch.randn(2, 3, 9, 11)]"
CASES += [
    ("maxpool_module", "return self.p(xs[0])", "self.p = nn.MaxPool2d(2)", "[]", X5),
    ("maxpool_pad_stride", "return torch.tanh(F.max_pool2d(torch.relu(xs[0]) - 0.5, 3, stride=2, padding=1))",
     "pass", "[]", X5),
    ("maxpool_rect_channel_bias", "return F.max_pool2d(xs[0] + self.b, (2, 3), stride=(1, 2)) * 2.0",
     "self.b = nn.Parameter(torch.randn(3, 1, 1))", "[]", X5),
    ("avgpool_module_pad", "return self.p(xs[0])", "self.p = nn.AvgPool2d(3, stride=2, padding=1)", "[]", X5),
    ("avgpool_no_pad_count", "return F.avg_pool2d(torch.sigmoid(xs[0]), 3, 1, 1, count_include_pad=False) + 1.0",
     "pass", "[]", X5),
    ("maxpool_nan", "return F.max_pool2d(torch.log(xs[0]), 2)", "pass", "[]", X5),
    ("maxpool_nan_after_relu", "return F.max_pool2d(torch.relu(torch.log(xs[0]) * 2.0 + 0.1), 2)", "pass", "[]",
     X5),
]
CASES += [  # reductions over few long rows (split over programs in Triton), losses reduced to one value
    ("mse_mean_all", "return torch.mean((xs[0] - xs[1]) ** 2)", "pass", "[]",
     "[torch.randn(3, 700), torch.randn(3, 700)]"),
    ("sum_all_post", "return torch.sigmoid(xs[0].sum()) * 2.0", "pass", "[]", "[torch.randn(5, 301)]"),
    ("max_few_long_rows", "return torch.amax(torch.abs(xs[0]), dim=1) - 1.0", "pass", "[]", "[torch.randn(3, 1000)]"),
    ("norm_few_long_rows_bias", "return torch.norm(xs[0], p=2, dim=1) + self.b",
     "self.b = nn.Parameter(torch.randn(2))", "[]", "[torch.randn(2, 999)]"),
    ("prod_few_long_rows", "return torch.prod(xs[0] * 0.01 + 1.0, dim=1)", "pass", "[]", "[torch.randn(2, 600)]"),
    ("smooth_l1_mean", "return F.smooth_l1_loss(xs[0] * 2.0, xs[1])", "pass", "[]",
     "[torch.randn(3, 400), torch.randn(3, 400)]"),
    ("huber_sum_delta", "return F.huber_loss(xs[0], xs[1], reduction='sum', delta=0.5)", "pass", "[]",
     "[torch.randn(3, 10, 7), torch.randn(3, 10, 7)]"),
    ("mse_module_mean", "return self.l(xs[0], xs[1])", "self.l = nn.MSELoss()", "[]",
     "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("kl_div_batchmean", "return F.kl_div(F.log_softmax(xs[0], dim=1), F.log_softmax(xs[1], dim=1),"
     " reduction='batchmean', log_target=True)", "pass", "[]", "[torch.randn(4, 33), torch.randn(4, 33)]"),
    ("triplet_module_mean", "return self.l(xs[0], xs[1], xs[2])", "self.l = nn.TripletMarginLoss(margin=0.5)", "[]",
     "[torch.randn(6, 40), torch.randn(6, 40), torch.randn(6, 40)]"),
    ("triplet_l1_none", "return F.triplet_margin_loss(xs[0], xs[1], xs[2], margin=2.0, p=1, reduction='none')",
     "pass", "[]", "[torch.randn(3, 5, 9), torch.randn(3, 5, 9), torch.randn(3, 5, 9)]"),
    ("min_with_constant_tensor", "return torch.min(xs[0], torch.tensor(0.3)) * 2.0", "pass", "[]", X),
    ("maximum_constant_first_aliases", "return torch.multiply(torch.maximum(torch.tensor(-0.2), xs[0]), 3.0)"
     " - torch.subtract(xs[0], 1.0)", "pass", "[]", X),
    ("cross_entropy_none", "return F.cross_entropy(xs[0], xs[1], reduction='none')", "pass", "[]",
     "[torch.randn(6, 9) * 3.0, torch.randint(0, 9, (6,))]"),
    ("cross_entropy_mean_ignored_rows", "return F.cross_entropy(xs[0] * 2.0 + 1.0, xs[1], ignore_index=-1) * 0.5",
     "pass", "[]", "[torch.randn(7, 5), torch.tensor([0, -1, 4, 2, -1, 1, 3])]"),
    ("cross_entropy_module_sum", "return self.l(torch.tanh(xs[0]), xs[1])",
     "self.l = nn.CrossEntropyLoss(reduction='sum', ignore_index=2)", "[]",
     "[torch.randn(5, 1100), torch.tensor([2, 7, 1099, 0, 2])]"),
    ("cross_entropy_mean_all_ignored", "return F.cross_entropy(xs[0], xs[1])", "pass", "[]",
     "[torch.randn(3, 4), torch.full((3,), -100)]"),
    ("nan_through_clamps", "y = torch.log(xs[0])\nreturn torch.relu(y) + F.hardsigmoid(y) + torch.clamp(y, -0.5, 0.5)"
     " + F.hardtanh(y) + torch.maximum(y, xs[0]) + torch.minimum(xs[0], y) + torch.min(y, torch.tensor(0.3))",
     "pass", "[]", X),
    ("hinge_mean", "return torch.mean(torch.clamp(1 - xs[0] * xs[1], min=0))", "pass", "[]",
     "[torch.randn(4, 257), torch.randn(4, 257)]"),
]
X1D = "[torch.randn(2, 3, 23)]"
X3D = "[torch.randn(2, 3, 7, 6, 9)]"
CASES += [  # pooling over 1 and 3 spatial dims, dilation, global average pooling
    ("maxpool1d_dilated", "return self.p(xs[0])", "self.p = nn.MaxPool1d(4, stride=1, padding=2, dilation=3)", "[]",
     X1D),
    ("avgpool1d_fn_post", "return F.avg_pool1d(torch.relu(xs[0]), 3, 2, 1) * 2.0 - 1.0", "pass", "[]", X1D),
    ("maxpool2d_dilated", "return F.max_pool2d(xs[0], 3, stride=2, padding=1, dilation=2)", "pass", "[]", X5),
    ("maxpool3d_module", "return self.p(xs[0] * 0.5)", "self.p = nn.MaxPool3d(2)", "[]", X3D),
    ("maxpool3d_pad_stride_dilated", "return torch.tanh(F.max_pool3d(xs[0], (3, 2, 3), stride=(2, 1, 2),"
     " padding=1, dilation=(1, 2, 1)))", "pass", "[]", X3D),
    ("avgpool3d_pad", "return self.p(xs[0])", "self.p = nn.AvgPool3d(3, stride=2, padding=1)", "[]", X3D),
    # stride-1 W windows whose taps' alignments differ: the Triton template's chunked W reads
    ("maxpool1d_chunked_pre_post", "return torch.tanh(F.max_pool1d(torch.relu(xs[0]) - 0.5, 5, 1, 2)) * 2.0",
     "pass", "[]", X1D),
    ("maxpool2d_stride1_chunked", "return F.max_pool2d(torch.log(xs[0]), 3, stride=1, padding=1)", "pass", "[]", X5),
    ("avgpool2d_stride1_chunked_dilated_width", "return F.avg_pool2d(xs[0] * 3.0, (2, 7), stride=1, padding=(1, 3))",
     "pass", "[]", X5),
    ("avgpool3d_no_pad_count_channel_bias", "return F.avg_pool3d(xs[0] + self.b, 3, 2, 1, count_include_pad=False)",
     "self.b = nn.Parameter(torch.randn(3, 1, 1, 1))", "[]", X3D),
    # 80 taps: a window the Triton template loops over rather than unrolls
    ("avgpool3d_window_of_80", "return F.avg_pool3d(xs[0], (5, 4, 4), stride=1)", "pass", "[]", X3D),
    ("global_avg_pool2d", "return F.adaptive_avg_pool2d(torch.sigmoid(xs[0]), 1) + 1.0", "pass", "[]", X5),
    ("global_avg_pool3d_module", "return self.p(xs[0])", "self.p = nn.AdaptiveAvgPool3d((1, 1, 1))", "[]", X3D),
    # ATen's overloads, as extracted tasks call them (stride [] is the kernel's)
    ("aten_avgpool2d_default_stride", "return torch.ops.aten.avg_pool2d.default(torch.relu(xs[0]), [2, 2], []) * 2.0",
     "pass", "[]", X5),
    ("aten_avgpool2d_pad_no_count",
     "return torch.ops.aten.avg_pool2d.default(xs[0], [3, 3], [2, 2], [1, 1], False, False)", "pass", "[]", X5),
    ("aten_maxpool2d_pad", "return torch.ops.aten.max_pool2d.default(xs[0] - 0.5, [3, 3], [2, 2], [1, 1])", "pass",
     "[]", X5),
    ("aten_avgpool3d", "return torch.ops.aten.avg_pool3d.default(xs[0], [2, 2, 2], [2, 2, 2])", "pass", "[]", X3D),
]

# 16-bit float tasks (the Triton templates only): (name, forward body, init body); the
# init is followed by a cast of the module to the dtype, the input made in it
HALF_CASES = [
    ("gelu_tanh", "x = xs[0]\nreturn 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))",
     "pass"),
    ("softmax", "return torch.softmax(xs[0] * 2.0, dim=-1)", "pass"),
    ("layernorm_scaled", "return self.n(xs[0]) * 2.0 + 1.0", "self.n = nn.LayerNorm(33)"),
    ("sum_then_tanh", "return torch.tanh(xs[0].sum(dim=1))", "pass"),
    ("bias_relu", "return torch.relu(xs[0] + self.b)", "self.b = nn.Parameter(torch.randn(33))"),
    ("cumsum", "return torch.cumsum(xs[0], dim=1) * 0.5", "pass"),
    ("amax_keepdim_sub", "return xs[0] - torch.amax(xs[0], dim=1, keepdim=True)", "pass"),
]
