"""The mutation matrix as a picture and as a page (``assignadd-mutants --html``), drawn from the matrix
document of ``hypotheses.mutation.matrix_to_dict`` alone."""

from __future__ import annotations

from . import html
from .figures import figure_png, styled_pyplot


NOT_RUN = {"verdict": "not-run", "right": None}  # a cell left out by ``--judged-only`` (never judged)


def matrix_figure_png(doc: dict) -> bytes:
    """The matrix as a picture: rows mutants, columns claims; green = verdict as expected, red = not,
    grey = not judged (downstream of the break), each cell labelled with its verdict."""
    plt = styled_pyplot()
    claims, mutants = doc["claims"], [m["name"] for m in doc["mutants"]]
    cell = {(c["claim"], c["mutant"]): c for c in doc["cells"]}
    colour = {True: "#b7e1b0", False: "#f4a6a6", None: "#e6e6e6"}
    fig, ax = plt.subplots(figsize=(1.6 + 1.35 * len(claims), 0.9 + 0.38 * len(mutants)))
    for i, m in enumerate(mutants):
        for j, c in enumerate(claims):
            x = cell.get((c, m), NOT_RUN)
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour[x["right"]], edgecolor="white"))
            ax.text(j + 0.5, i + 0.5, x["verdict"].replace("-", " "), ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(claims))
    ax.set_ylim(len(mutants), 0)
    names = [c.replace("_", " ") for c in claims]
    ax.set_xticks([j + 0.5 for j in range(len(claims))], names, rotation=30, ha="right", fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(mutants))], mutants, fontsize=7)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    s = doc["summary"]
    ax.set_title(f"{s['right']}/{s['judged']} judged cells as expected (green); red: not; grey: not judged", fontsize=8)
    fig.tight_layout()
    return figure_png(fig)


def matrix_html(doc: dict, checkpoint: str) -> str:
    """A self-contained page: the figure, then the table with each cell's verdict and reason."""
    claims, mutants = doc["claims"], doc["mutants"]
    cell = {(c["claim"], c["mutant"]): c for c in doc["cells"]}
    mark = {True: "✓", False: "✗", None: "·"}
    rows = [
        [html.breakable(m["name"]), m["component"]]
        + [
            html.join([html.verdict(x["verdict"]), " ", mark[x["right"]]])
            for x in (cell.get((c, m["name"]), NOT_RUN) for c in claims)
        ]
        for m in mutants
    ]
    s = doc["summary"]
    wrong = (
        html.tag("ul", [html.tag("li", w) for w in s["wrong"]])
        if s["wrong"]
        else html.tag("p", "Every judged cell is as expected.")
    )
    return html.page(
        f"assignadd mutants: {checkpoint}",
        html.tag("h1", "Mutation testing of the claims"),
        html.tag(
            "p",
            f"Checkpoint {checkpoint}. Each mutant breaks one component (every other weight "
            "bit-identical). Expected: the broken component's claim fails, claims upstream pass, "
            "behaviour claims fail; downstream claims are shown, not judged.",
            class_="meta",
        ),
        html.figure(
            "mutants",
            "Claim x mutant matrix",
            f"{s['right']}/{s['judged']} judged cells as expected.",
            matrix_figure_png(doc),
        ),
        html.table(["mutant", "component"] + [html.breakable(c) for c in claims], rows, wide=True),
        html.tag("h2", "Cells not as expected"),
        wrong,
        html.tag("h2", "Mutants"),
        html.table(
            ["mutant", "component", "what it does", "parameters changed"],
            [[m["name"], m["component"], m["description"], ", ".join(m["changed_parameters"])] for m in mutants],
        ),
    )
