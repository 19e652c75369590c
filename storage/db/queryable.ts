// Queryable: the postgres.js handle or a transaction, whichever a query runs on.
import type { ISql } from 'postgres';

/** A pool or a transaction: lookups run in either, so a service can use them inside `sql.begin`. */
export type Queryable = ISql;
