-- 007_tenant_names: any tenant name, not only subject-safe ones.
--
-- 003 limited tenant names to letters, digits, '-' and '_' because they
-- name review subjects. Names are the operators' to choose; the subject now
-- uses subject_token(name) instead, which maps every other character to '_'.
ALTER TABLE tenants DROP CONSTRAINT tenants_name_token;
ALTER TABLE tenants ADD CONSTRAINT tenants_name_length CHECK (length(name) BETWEEN 1 AND 128);

-- subject_token is broker.SubjectToken in SQL: the two must agree.
CREATE FUNCTION subject_token(s text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(s, '[^A-Za-z0-9_-]', '_', 'g')
$$;
