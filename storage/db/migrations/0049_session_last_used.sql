-- When each session was last used (issue 18; docs/auth.md, "Sessions"): GET /user/sessions shows it
-- so a person can tell a forgotten browser from the one in hand. Written at most once a minute per
-- session, not on every request. Null: not used since sign-in (or since before this column).
alter table sessions add column last_used_at timestamptz;
