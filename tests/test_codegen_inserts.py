"""BlockEdits.insert: statements put before statements of a block, by their index in the body
as it was read, land there whatever else is inserted into the same block in the same run."""

from __future__ import annotations

import libcst as cst

from autofix.codegen import BlockEdits


def _inserter(code: str):
    def insert(body, index):
        return [*body[:index], cst.parse_statement(code), *body[index:]]

    return insert


def test_inserts_before_two_statements_of_one_block_land_before_each():
    module = cst.parse_module("a = 1\nfor i in a_data:\n    pass\nb = 2\nfor j in b_data:\n    pass\n")
    edits = BlockEdits()
    # Queued first for the first loop, as a rule planning loop after loop does.
    edits.insert(module, 1, _inserter("dist_a = a_data\n"))
    edits.insert(module, 3, _inserter("dist_b = b_data\n"))
    assert edits.apply(module).code == (
        "a = 1\ndist_a = a_data\nfor i in a_data:\n    pass\nb = 2\ndist_b = b_data\nfor j in b_data:\n    pass\n"
    )


def test_inserts_queued_in_any_order_and_by_several_plans_keep_their_places():
    module = cst.parse_module("x = 0\ny = 1\nz = 2\n")
    first, second = BlockEdits(), BlockEdits()
    second.insert(module, 2, _inserter("before_z = 1\n"))
    first.insert(module, 0, _inserter("before_x = 1\n"))
    first.insert(module, 2, _inserter("also_before_z = 1\n"))
    first.extend(second)
    assert first.apply(module).code == "before_x = 1\nx = 0\ny = 1\nalso_before_z = 1\nbefore_z = 1\nz = 2\n"


def test_inserts_run_before_the_blocks_other_edits():
    module = cst.parse_module("x = 0\ny = 1\n")
    edits = BlockEdits()
    edits.add(module, lambda body: [*body, cst.parse_statement("last = 1\n")])
    edits.insert(module, 1, _inserter("before_y = 1\n"))
    assert edits.apply(module).code == "x = 0\nbefore_y = 1\ny = 1\nlast = 1\n"
