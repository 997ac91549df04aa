import { describe, expect, it } from "vitest";
import { parseDatabaseUrl } from "../../src/db/url.js";

describe("parseDatabaseUrl", () => {
  it("reads SQLite file paths, relative and absolute", () => {
    expect(parseDatabaseUrl("sqlite:data/relay.db")).toEqual({ kind: "sqlite", path: "data/relay.db" });
    expect(parseDatabaseUrl("sqlite:/var/lib/relay.db")).toEqual({
      kind: "sqlite",
      path: "/var/lib/relay.db",
    });
    expect(parseDatabaseUrl("sqlite:///var/lib/relay.db")).toEqual({
      kind: "sqlite",
      path: "/var/lib/relay.db",
    });
    expect(parseDatabaseUrl("sqlite://relay.db")).toEqual({ kind: "sqlite", path: "relay.db" });
  });

  it("reads in-memory SQLite", () => {
    expect(parseDatabaseUrl("sqlite::memory:")).toEqual({ kind: "sqlite", path: ":memory:" });
  });

  it("passes PostgreSQL URLs through", () => {
    for (const url of ["postgres://relay@db:5432/relay", "postgresql://u:p@127.0.0.1/x?sslmode=disable"]) {
      expect(parseDatabaseUrl(url)).toEqual({ kind: "postgres", connectionString: url });
    }
  });

  it("rejects other schemes and empty paths without echoing passwords", () => {
    expect(() => parseDatabaseUrl("sqlite:")).toThrow(/missing SQLite file path/);
    expect(() => parseDatabaseUrl("relay.db")).toThrow(/unsupported database URL/);
    expect(() => parseDatabaseUrl("mysql://root:hunter2@db/relay")).toThrow(/mysql:\/\/root:\*\*\*@db/);
    expect(() => parseDatabaseUrl("mysql://root:hunter2@db/relay")).not.toThrow(/hunter2/);
  });
});
