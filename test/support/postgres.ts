import { randomBytes } from "node:crypto";
import pg from "pg";

/** Throwaway PostgreSQL databases on the development server (127.0.0.1:5432, trust auth). */
const ADMIN_URL = process.env.RELAY_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

async function withAdmin<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** The reason PostgreSQL cannot be used, or undefined when it can. */
export async function postgresProblem(): Promise<string | undefined> {
  try {
    await withAdmin((admin) => admin.query("SELECT 1"));
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `relay_test_${randomBytes(6).toString("hex")}`;
  await withAdmin((admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () =>
      withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}
