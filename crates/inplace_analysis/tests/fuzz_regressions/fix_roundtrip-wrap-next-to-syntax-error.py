import torch

x = torch.tensor([2.0], requires_grad=True)
y = 
y.sum().backward()
print("正确的 x.grad          =", x.grad.item())

x2 = 
y2 = torch.sigmoid(x2)
y2.data.mul_(0)                 # 💀 .data 不碰版本计数器  # expect: IP401
y2.().backward()
print("�ires_grad=True)
y = 
y.sum().backward()
print("正确的 x.grad          =", x.grad.item())

x2 = 
y2 = torch.sigmoid(x2)
y2.data.mul_()               碰版本计数器  # expect: IP401
y2.sum().backward()
print("用 .did(x2)
y2.data.mul_(0)                 # 💀 .data 不碰版本�ata 改过之后 x.grad ="� .did(x2)
y2.data.mul_(0)                 # 💀 .data 不碰版本�ata 改过之后 x.grad =", x2.grad.item(), " ← 没有任何报错")
print("y2 的版本号仍然是", y2._version)
