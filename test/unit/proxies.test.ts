import { describe, expect, it } from "vitest";
import { trustedProxies } from "../../src/api/proxies.js";

describe("trustedProxies", () => {
  it("matches addresses and CIDR ranges of both families, IPv4-mapped peers as IPv4", () => {
    const trusted = trustedProxies(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::1"]);
    for (const address of ["10.1.2.3", "::ffff:10.1.2.3", "192.0.2.7", "2001:db8::5", "::1"])
      expect(trusted(address), address).toBe(true);
    for (const address of ["11.0.0.1", "192.0.2.8", "2001:db9::1", "127.0.0.1", "", "not-an-address"])
      expect(trusted(address), address).toBe(false);
  });

  it("trusts nobody when the list is empty", () => {
    expect(trustedProxies([])("127.0.0.1")).toBe(false);
  });
});
