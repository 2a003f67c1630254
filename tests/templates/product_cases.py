"""The matrix-product and convolution template cases that the CPU tests run under
Triton's interpreter and the GPU tests run as real kernels (sources of small tasks)."""

GEMM_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}
CONV_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4, "num_stages": 2}

# (name, forward, inputs)
GEMM_CASES = [
    ("square", "return torch.matmul(A, B)", "[torch.randn(32, 32), torch.randn(32, 32)]"),
    ("ragged", "return A @ B", "[torch.randn(37, 53), torch.randn(53, 29)]"),
    ("trans_a", "return torch.matmul(A.T, B)", "[torch.randn(53, 37), torch.randn(53, 29)]"),
    ("trans_b", "return torch.mm(A, B.t())", "[torch.randn(37, 53), torch.randn(29, 53)]"),
    ("trans_both", "return torch.matmul(A.transpose(0, 1), B.T)", "[torch.randn(53, 37), torch.randn(29, 53)]"),
    ("bmm", "return torch.bmm(A, B)", "[torch.randn(3, 21, 45), torch.randn(3, 45, 19)]"),
    ("bmm_trans", "return torch.bmm(A.transpose(1, 2), B.mT)", "[torch.randn(3, 45, 21), torch.randn(3, 19, 45)]"),
    ("batch_times_matrix", "return torch.matmul(A, B)", "[torch.randn(3, 21, 45), torch.randn(45, 19)]"),
    ("batch_of_one", "return torch.matmul(A, B)", "[torch.randn(1, 21, 45), torch.randn(3, 45, 19)]"),
    ("trans_a_copy_tiles", "return torch.matmul(A.T, B)", "[torch.randn(130, 70), torch.randn(130, 9)]"),
    ("bmm_copy_tiles", "return torch.bmm(A, B)", "[torch.randn(2, 9, 130), torch.randn(2, 130, 70)]"),
    ("column", "return A @ B", "[torch.randn(40, 300), torch.randn(300, 1)]"),
    ("batched_column", "return torch.bmm(A, B)", "[torch.randn(3, 21, 300), torch.randn(3, 300, 1)]"),
    ("trans_a_column", "return torch.matmul(A.T, B)", "[torch.randn(300, 37), torch.randn(300, 1)]"),
    ("four_d_times_matrix", "return torch.matmul(A, B)", "[torch.randn(2, 3, 5, 45), torch.randn(45, 19)]"),
    ("einsum", 'return torch.einsum("bijl,lk->bijk", A, B)', "[torch.randn(2, 3, 5, 45), torch.randn(45, 19)]"),
    ("four_d_stacked", "return torch.matmul(A, B)", "[torch.randn(2, 3, 21, 45), torch.randn(2, 3, 45, 19)]"),
    ("four_d_stacked_trans_b", "return A @ B.transpose(-2, -1)", "[torch.randn(2, 3, 21, 45), torch.randn(2, 3, 19, 45)]"),
    ("five_d_stacked_trans_a", "return torch.matmul(A.mT, B)",
     "[torch.randn(2, 2, 3, 45, 21), torch.randn(2, 2, 3, 45, 19)]"),
]

# (name, module constructor, input)
CONV_CASES = [
    ("conv1d", "nn.Conv1d(3, 5, 3, stride=2, padding=2, dilation=2)", "torch.randn(2, 3, 19)"),
    ("conv1d_no_bias", "nn.Conv1d(6, 4, 4, padding=1, bias=False)", "torch.randn(2, 6, 13)"),
    ("conv2d", "nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2))", "torch.randn(2, 3, 9, 8)"),
    ("conv2d_long_sum", "nn.Conv2d(8, 20, 3, padding=1, bias=False)", "torch.randn(1, 8, 7, 6)"),
    ("conv2d_groups", "nn.Conv2d(4, 6, (2, 3), padding=(1, 1), groups=2, bias=False)", "torch.randn(2, 4, 6, 7)"),
    ("conv2d_depthwise", "nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4)", "torch.randn(2, 4, 9, 9)"),
    ("conv2d_depthwise_multiplier", "nn.Conv2d(3, 6, (3, 1), groups=3, bias=False)", "torch.randn(1, 3, 8, 5)"),
    ("conv2d_one_input_channel", "nn.Conv2d(1, 5, 3, padding=1)", "torch.randn(2, 1, 7, 6)"),
    ("conv2d_same", "nn.Conv2d(3, 4, (3, 5), padding='same')", "torch.randn(1, 3, 6, 7)"),
    ("conv3d", "nn.Conv3d(3, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1))",
     "torch.randn(2, 3, 5, 7, 4)"),
    ("conv3d_groups", "nn.Conv3d(4, 4, 3, padding=1, groups=2, bias=False)", "torch.randn(1, 4, 4, 5, 3)"),
    ("transposed1d", "nn.ConvTranspose1d(3, 5, 3, stride=2, padding=1, output_padding=1, dilation=2)",
     "torch.randn(2, 3, 9)"),
    ("transposed1d_no_bias", "nn.ConvTranspose1d(4, 3, 4, bias=False)", "torch.randn(2, 4, 7)"),
    ("transposed2d", "nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), "
     "dilation=(1, 2), groups=2)", "torch.randn(2, 4, 5, 4)"),
    ("transposed2d_depthwise", "nn.ConvTranspose2d(3, 3, 3, stride=2, groups=3, bias=False)",
     "torch.randn(1, 3, 4, 5)"),
    ("transposed2d_one_input_channel", "nn.ConvTranspose2d(1, 3, 3, stride=2, padding=1, dilation=2)",
     "torch.randn(1, 1, 4, 5)"),
    ("transposed2d_phases_without_taps", "nn.ConvTranspose2d(3, 4, 3, stride=5, padding=1, dilation=2)",
     "torch.randn(1, 3, 3, 4)"),
    ("transposed1d_stride_dividing_dilation", "nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1, dilation=2)",
     "torch.randn(2, 3, 6)"),
    ("transposed2d_strided_rows_only", "nn.ConvTranspose2d(3, 4, (3, 2), stride=(3, 1), padding=(1, 0))",
     "torch.randn(1, 3, 4, 5)"),
    ("transposed2d_rows_longer_than_a_block", "nn.ConvTranspose2d(2, 3, 3, stride=(2, 3), padding=1)",
     "torch.randn(1, 2, 3, 21)"),
    ("transposed3d", "nn.ConvTranspose3d(4, 2, (3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), "
     "output_padding=(1, 0, 1), groups=2)", "torch.randn(1, 4, 3, 4, 3)"),
]

# TAPS on: the kernel taps outermost, each tap's input channels in BLOCK_K steps; it applies
# to standard and stride-1 transposed convolutions with 16 or more input channels per group
# (more than one BLOCK_K step of channels in some: 40 per group against BLOCK_K 16)
TAPS_CASES = [
    ("conv1d", "nn.Conv1d(40, 24, 3, stride=2, padding=2, dilation=2)", "torch.randn(2, 40, 19)"),
    ("conv2d_asymmetric", "nn.Conv2d(16, 20, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2))",
     "torch.randn(2, 16, 9, 11)"),
    ("conv2d_groups", "nn.Conv2d(32, 12, (2, 3), padding=(1, 1), groups=2, bias=False)", "torch.randn(1, 32, 6, 7)"),
    ("conv3d", "nn.Conv3d(16, 8, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1))",
     "torch.randn(1, 16, 5, 7, 6)"),
    ("transposed1d_dilated", "nn.ConvTranspose1d(40, 24, 5, padding=1, dilation=3)", "torch.randn(2, 40, 17)"),
    ("transposed2d_asymmetric", "nn.ConvTranspose2d(32, 12, (3, 5), padding=(1, 0), groups=2, bias=False)",
     "torch.randn(2, 32, 7, 9)"),
    ("transposed3d", "nn.ConvTranspose3d(16, 8, 3, padding=1)", "torch.randn(1, 16, 4, 5, 3)"),
]
