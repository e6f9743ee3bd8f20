"""What migrations 0012 and 0013 share for `memory_recent_word_matches`: a SECURITY DEFINER
function (it runs as the owner of the tables, past row-level security) that applies the
policies' own tenant condition itself, reading the tenant from the same setting, and returns
nothing when it is unset; its search path names the catalog and this schema only (pg_temp
last); the plan settings leave the account's words index as its only way to the rows; and only
the application role may call it. (A module whose name starts with an underscore is not a
migration.) What it makes is what those migrations make, and what 0013 restores when reversed:
a later change to the function copies this into its own migration rather than editing it here.
"""

ROLE = "threengram_app"


def word_matches_function(*, arguments: str, returns: str, query: str, using: str) -> str:
    """The `DO` block that (re)creates the function and its grants. `query`: its statement, a
    format() string with %%s for the tenant and %1$I for the schema; `using`: its parameters."""
    granted = signature(arguments)
    return f"""
DO $$
BEGIN
    EXECUTE format($function$
        CREATE OR REPLACE FUNCTION memory_recent_word_matches({arguments})
        RETURNS {returns}
        LANGUAGE plpgsql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, %1$I, pg_temp
        SET enable_seqscan = off
        SET enable_indexscan = off
        SET enable_bitmapscan = on
        AS $body$
        DECLARE
            -- The tenant the row-level security policies read (migration 0007).
            tenant bigint := NULLIF(current_setting('threengram.tenant_id', true), '')::bigint;
        BEGIN
            IF tenant IS NULL THEN
                RETURN;
            END IF;
            RETURN QUERY EXECUTE format({query}, tenant)
            USING {using};
        END
        $body$
    $function$, current_schema());
    REVOKE ALL ON FUNCTION {granted} FROM PUBLIC;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT EXECUTE ON FUNCTION {granted} TO {ROLE};
    END IF;
END
$$;
"""


def signature(arguments: str) -> str:
    """The function's signature for the arguments it is declared with."""
    return f"memory_recent_word_matches({_types(arguments)})"


def _types(arguments: str) -> str:
    """'terms tsquery, max_rows integer DEFAULT 1' -> 'tsquery, integer'."""
    return ", ".join(
        argument.split(" DEFAULT ")[0].split()[-1] for argument in arguments.split(",")
    )
