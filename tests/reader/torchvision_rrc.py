"""Reference statistics of torchvision's RandomResizedCrop.get_params (the real torchvision).

Usage: torchvision_rrc.py N W H [W H ...]
For each image size prints one line: W H, then the 10-bin histogram of the crop's area
fraction w*h/(W*H) over [0, 1], the 10-bin histogram of log(w/h) over [log(3/4) - 0.05,
log(4/3) + 0.05], the mean of the crop's centre (x + w/2)/W and (y + h/2)/H, and the first
draw's (x, y, w, h) after torch.manual_seed(0) (exact only when every draw falls back).
"""
import math
import sys

import torch
from torchvision.transforms import RandomResizedCrop

n = int(sys.argv[1])
sizes = [(int(sys.argv[i]), int(sys.argv[i + 1])) for i in range(2, len(sys.argv), 2)]
lo, hi = math.log(3 / 4) - 0.05, math.log(4 / 3) + 0.05
for w_img, h_img in sizes:
    torch.manual_seed(0)
    img = torch.empty(1, h_img, w_img)  # get_params reads only the size
    area_hist, ratio_hist = [0] * 10, [0] * 10
    cx = cy = 0.0
    first = None
    for k in range(n):
        i, j, h, w = RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        if first is None:
            first = (j, i, w, h)
        area_hist[min(9, int(10 * w * h / (w_img * h_img)))] += 1
        ratio_hist[max(0, min(9, int(10 * (math.log(w / h) - lo) / (hi - lo))))] += 1
        cx += (j + w / 2) / w_img
        cy += (i + h / 2) / h_img
    print(w_img, h_img, *[c / n for c in area_hist], *[c / n for c in ratio_hist], cx / n,
          cy / n, *first)
