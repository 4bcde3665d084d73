"""Reference crops for the reader's load-time transforms: Pillow decodes, crops and resizes.

Usage: pillow_crops.py PHOTO_DIR OUT_DIR COUNT MAX_SIDE [write|crops]
Writes OUT_DIR/k.jpg for the first COUNT photos (sorted names): the photo shrunk so its longer
side is at most MAX_SIDE, saved as a baseline JPEG at quality 90 with 4:2:0 chroma (what
`mmpack build --codec jpeg` stores), plus OUT_DIR/k.rgb (Pillow's decode of k.jpg, [H, W, 3]
uint8). Then reads OUT_DIR/windows.txt (lines "k x y w h out_w out_h") and writes, per line n,
OUT_DIR/ref-n.rgb: Image.open(k.jpg).convert("RGB").resize((out_w, out_h), Image.LANCZOS,
box=(x, y, x + w, y + h)). Prints "k W H" per photo.
"""
import os
import sys

from PIL import Image

photo_dir, out_dir, count, max_side = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else "write"
if mode == "write":
    names = sorted(os.listdir(photo_dir))[:count]
    for k, name in enumerate(names):
        im = Image.open(os.path.join(photo_dir, name)).convert("RGB")
        im.thumbnail((max_side, max_side), Image.LANCZOS)
        path = os.path.join(out_dir, f"{k}.jpg")
        im.save(path, quality=90, subsampling=2, optimize=False, progressive=False)
        dec = Image.open(path).convert("RGB")
        with open(os.path.join(out_dir, f"{k}.rgb"), "wb") as f:
            f.write(dec.tobytes())
        print(k, dec.width, dec.height)
else:
    with open(os.path.join(out_dir, "windows.txt")) as f:
        for n, line in enumerate(f):
            k, x, y, w, h, ow, oh = map(int, line.split())
            im = Image.open(os.path.join(out_dir, f"{k}.jpg")).convert("RGB")
            ref = im.resize((ow, oh), Image.LANCZOS, box=(x, y, x + w, y + h))
            with open(os.path.join(out_dir, f"ref-{n}.rgb"), "wb") as g:
                g.write(ref.tobytes())
