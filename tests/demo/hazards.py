"""A tour of every in-place hazard inplace-lsp finds. Run: inplace-lsp check tests/demo/hazards.py"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def form1_leaf():
    w = torch.randn(3, requires_grad=True)
    w += 1  # IP101: raises here


def out_argument_under_autograd():
    w = torch.randn(3, requires_grad=True)
    buf = torch.empty(3)
    torch.mul(w, 2.0, out=buf)  # IP102: raises here


def form2_leaf_view():
    x = torch.zeros(3, requires_grad=True)
    x[0] = 1.0  # IP201: raises here


def form3_saved_output():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.sigmoid(x)
    y += 1  # IP301: backward() below raises
    y.sum().backward()


def form3_saved_input():
    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3, requires_grad=True)
    h = x * 1.0
    out = h * w
    h.mul_(2)  # IP302
    out.sum().backward()


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid(), nn.ReLU(inplace=True))  # IP303

    def forward(self, x):
        return self.net(x)


def gan_step():
    G, D = nn.Linear(2, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
    opt_d = torch.optim.Adam(D.parameters())
    fake = G(torch.randn(8, 2))
    d_loss = D(fake).mean()
    g_loss = -D(fake).mean()
    d_loss.backward(retain_graph=True)
    opt_d.step()  # IP304: g_loss.backward() raises
    g_loss.backward()


def data_bypass():
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.sigmoid(x)
    y.data.mul_(0)  # IP401: gradient silently 0.0
    y.sum().backward()


def clobbered_alias():
    feat = nn.Linear(4, 4)(torch.randn(1, 4))
    h = torch.relu_(feat)  # IP402: feat changes too
    return h, feat


def param_rebind():
    v = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([v], lr=0.1)
    (v * v).backward()
    v = v - 0.1 * v.grad  # IP403: opt keeps the old v
    opt.step()


torch.autograd.set_detect_anomaly(True)  # IP501
Head()(torch.randn(2, 4)).sum().backward()
logits = F.softmax(torch.randn(2, 3, requires_grad=True), dim=-1)
