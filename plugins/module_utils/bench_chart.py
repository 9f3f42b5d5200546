# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The bench's picture: one bar group per box, the recipe's figures as lines, as a PNG.

Standard library only, so the controller needs no plotting package: a small RGB canvas, a
5x7 bitmap font for the labels, and smoke_png's encoder. Two panels: decode (one stream; four
streams per stream and in total) and prefill (4K and 32K-token prompts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke_png import png_bytes

# 5x7 glyphs: 7 rows of 5 pixels each ('#' on).
_GLYPHS = {
    "A": ".###.|#...#|#...#|#####|#...#|#...#|#...#", "B": "####.|#...#|#...#|####.|#...#|#...#|####.",
    "C": ".###.|#...#|#....|#....|#....|#...#|.###.", "D": "####.|#...#|#...#|#...#|#...#|#...#|####.",
    "E": "#####|#....|#....|####.|#....|#....|#####", "F": "#####|#....|#....|####.|#....|#....|#....",
    "G": ".###.|#...#|#....|#.###|#...#|#...#|.####", "H": "#...#|#...#|#...#|#####|#...#|#...#|#...#",
    "I": ".###.|..#..|..#..|..#..|..#..|..#..|.###.", "J": "..###|...#.|...#.|...#.|...#.|#..#.|.##..",
    "K": "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#", "L": "#....|#....|#....|#....|#....|#....|#####",
    "M": "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#", "N": "#...#|##..#|#.#.#|#..##|#...#|#...#|#...#",
    "O": ".###.|#...#|#...#|#...#|#...#|#...#|.###.", "P": "####.|#...#|#...#|####.|#....|#....|#....",
    "Q": ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#", "R": "####.|#...#|#...#|####.|#.#..|#..#.|#...#",
    "S": ".####|#....|#....|.###.|....#|....#|####.", "T": "#####|..#..|..#..|..#..|..#..|..#..|..#..",
    "U": "#...#|#...#|#...#|#...#|#...#|#...#|.###.", "V": "#...#|#...#|#...#|#...#|#...#|.#.#.|..#..",
    "W": "#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.", "X": "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#",
    "Y": "#...#|#...#|.#.#.|..#..|..#..|..#..|..#..", "Z": "#####|....#|...#.|..#..|.#...|#....|#####",
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.", "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####", "3": "#####|...#.|..#..|...#.|....#|#...#|.###.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.", "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.", "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.", "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "-": ".....|.....|.....|.###.|.....|.....|.....", ".": ".....|.....|.....|.....|.....|.##..|.##..",
    "_": ".....|.....|.....|.....|.....|.....|#####", "/": ".....|....#|...#.|..#..|.#...|#....|.....",
    ":": ".....|.##..|.##..|.....|.##..|.##..|.....", "(": "..#..|.#...|#....|#....|#....|.#...|..#..",
    ")": "..#..|...#.|....#|....#|....#|...#.|..#..", "%": "##...|##..#|...#.|..#..|.#...|#..##|...##",
    " ": ".....|.....|.....|.....|.....|.....|.....", "=": ".....|.....|#####|.....|#####|.....|.....",
}
WHITE, BLACK, GREY, LIGHT, RED = (255, 255, 255), (30, 30, 30), (120, 120, 120), (225, 225, 225), (211, 47, 47)
# Bar colours, and each one's recipe line a darker shade.
COLOURS = [(66, 133, 244), (251, 140, 0), (67, 160, 71)]
LINES = [(13, 71, 161), (191, 54, 12), (27, 94, 32)]


class Canvas(object):
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.rows = [[WHITE] * width for unused in range(height)]

    def rect(self, x0, y0, x1, y1, colour):
        for y in range(max(0, int(y0)), min(self.height, int(y1))):
            row = self.rows[y]
            for x in range(max(0, int(x0)), min(self.width, int(x1))):
                row[x] = colour

    def hline(self, x0, x1, y, colour, dash=0):
        for x in range(int(x0), int(x1)):
            if not dash or (x // dash) % 2 == 0:
                self.rect(x, y, x + 1, y + 2, colour)

    def text(self, x, y, text, colour=BLACK, scale=2):
        for char in str(text).upper():
            glyph = _GLYPHS.get(char, _GLYPHS[" "]).split("|")
            for row in range(7):
                for col in range(5):
                    if glyph[row][col] == "#":
                        self.rect(x + col * scale, y + row * scale, x + (col + 1) * scale, y + (row + 1) * scale, colour)
            x += 6 * scale
        return x

    @staticmethod
    def text_width(text, scale=2):
        return len(str(text)) * 6 * scale


def _nice_top(value):
    """A round axis top at or above value."""
    if value <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    for factor in (1, 2, 2.5, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def _panel(canvas, top, height, title, hosts, series, recipe, unit, slow=()):
    """One panel: a bar group per host (series: [(label, {host: value})]), recipe lines."""
    left, right = 90, canvas.width - 20
    canvas.text(left, top, title, BLACK, 2)
    plot_top, plot_bottom = top + 44, top + height - 62
    values = [v for _label, data in series for v in data.values() if v] + [r for r in recipe if r]
    axis_top = _nice_top(max(values) * 1.1 if values else 1.0)
    scale = (plot_bottom - plot_top) / axis_top
    for tick in range(5):
        value = axis_top * tick / 4
        y = plot_bottom - value * scale
        canvas.hline(left, right, y, LIGHT)
        label = "%d" % value
        canvas.text(left - 8 - Canvas.text_width(label), y - 7, label, GREY)
    canvas.text(8, plot_top - 30, unit, GREY)
    group = (right - left) / max(1, len(hosts))
    bar_width = min(40, (group * 0.7) / max(1, len(series)))
    for index, host in enumerate(hosts):
        x = left + index * group + (group - bar_width * len(series)) / 2
        for number, (_label, data) in enumerate(series):
            value = data.get(host)
            if value:
                canvas.rect(x + number * bar_width + 1, plot_bottom - value * scale, x + (number + 1) * bar_width - 1,
                            plot_bottom, COLOURS[number % len(COLOURS)])
        name = str(host)
        if Canvas.text_width(name) > group - 4:
            name = name[-max(3, int((group - 4) // 12)):]
        # A box flagged W_SLOW has its name in red.
        canvas.text(left + index * group + (group - Canvas.text_width(name)) / 2, plot_bottom + 10, name,
                    RED if host in slow else BLACK)
    for number, value in enumerate(recipe):
        if value:
            canvas.hline(left, right, plot_bottom - value * scale - 1, LINES[number % len(LINES)], dash=8)
    canvas.rect(left, plot_bottom, right, plot_bottom + 2, BLACK)
    x = left
    for number, (label, _data) in enumerate(series):
        canvas.rect(x, top + height - 24, x + 14, top + height - 10, COLOURS[number % len(COLOURS)])
        x = canvas.text(x + 20, top + height - 24, label, BLACK) + 24
    canvas.hline(x, x + 28, top + height - 18, GREY, dash=6)
    canvas.text(x + 34, top + height - 24, "recipe", BLACK)


def render(report, width=None):
    """The PNG bytes for a fleet report that holds bench figures (hosts with a ``bench`` entry)."""
    lines = [line for line in report.get("hosts", []) if line.get("bench") and line["bench"].get("cases")]
    hosts = [line["host"] for line in lines]
    slow = set(line["host"] for line in lines if line["bench"].get("slow"))
    cases = dict((line["host"], line["bench"]["cases"]) for line in lines)

    def pick(case, figure):
        return dict((h, (cases[h].get(case) or {}).get(figure)) for h in hosts)

    recipe = (report.get("bench") or {}).get("recipe") or {}

    def recipe_of(case, figure):
        return (recipe.get(case) or {}).get(figure)

    width = width or max(820, 110 + 150 * len(hosts))
    canvas = Canvas(width, 640)
    _panel(canvas, 10, 310, "DECODE TOK/S PER BOX (RED: W_SLOW)", hosts,
           [("1 STREAM", pick("decode_1", "per_stream")), ("4: PER STREAM", pick("decode_4", "per_stream")),
            ("4: TOTAL", pick("decode_4", "total"))],
           [recipe_of("decode_1", "per_stream"), recipe_of("decode_4", "per_stream"), recipe_of("decode_4", "total")],
           "TOK/S", slow)
    _panel(canvas, 330, 300, "PREFILL TOK/S PER BOX", hosts,
           [("4K PROMPT", pick("prefill_4k", "prefill")), ("32K PROMPT", pick("prefill_32k", "prefill"))],
           [recipe_of("prefill_4k", "prefill"), recipe_of("prefill_32k", "prefill")], "TOK/S", slow)
    return png_bytes(canvas.rows)
