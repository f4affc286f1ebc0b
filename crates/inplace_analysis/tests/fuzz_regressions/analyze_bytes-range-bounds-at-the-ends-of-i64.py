import torch
xs = [torch.randn(2) for _ in range(3)]
ys = [xs[t] * 2 for t in range(-9223372036854775807, 9223372036854775807)]
for i in range(-9223372036854775807, 9223372036854775807):
    xs[i] = xs[i] + 1
