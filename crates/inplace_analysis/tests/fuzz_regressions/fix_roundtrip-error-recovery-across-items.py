import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
x, y = torch.randn(5, 3), torch.randn(5)
loss = ( ** 2).mean()
list(head_a.parameters())
w.sub_(0.1 * w.grad)  # expect: IP101
