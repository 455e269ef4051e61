-- +goose Up
-- A fenced write (a job's update, fenced by the state and generation it was
-- read in) is sent in one round trip with the statements after it and the
-- COMMIT. A fence that does not hold changes no row, which is no error to
-- the server, so the COMMIT behind it would land the rest of the
-- transaction. expect_rows makes the shortfall an error in the statement
-- itself: the server then skips everything after it, the COMMIT included.
-- +goose StatementBegin
CREATE FUNCTION expect_rows(got bigint, want bigint, what text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    IF got <> want THEN
        RAISE EXCEPTION '%: % of % rows', what, got, want;
    END IF;
    RETURN got;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION expect_rows(bigint, bigint, text);
