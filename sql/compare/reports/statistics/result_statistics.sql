-- description: The statistics-mode workbook, one row per output line with msprobe's 25 columns (spec §5.2, §5.4), and the default mode's Reason; the default mode's Result follows its colour rules and its Err_message says why a row is unmatched (docs/rules.md).
-- stat_result's rows, each relative error printed from its number (rel_text; as
-- msq/export/_sheetxml.c's percent_texts prints it for the workbook).
SELECT * REPLACE (rel_text("MaxRelativeErr") AS "MaxRelativeErr",
                  rel_text("MinRelativeErr") AS "MinRelativeErr",
                  rel_text("MeanRelativeErr") AS "MeanRelativeErr",
                  rel_text("NormRelativeErr") AS "NormRelativeErr")
FROM stat_result
