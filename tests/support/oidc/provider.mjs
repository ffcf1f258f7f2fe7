// A real OpenID Provider for the sign-in tests: panva's oidc-provider (OpenID
// Certified), in-memory, with its development login and consent pages (any
// password; the login name is the account). Started by tests/support/oidc_provider.py.
//   node provider.mjs PORT REDIRECT_URI CLIENT_SECRET ACCOUNTS_JSON
// ACCOUNTS_JSON maps a login to its groups: {"bob": ["change-approvers"]}.
import Provider from 'oidc-provider';

const [port, redirectUri, clientSecret, accountsJson] = process.argv.slice(2);
const accounts = JSON.parse(accountsJson);
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: 'gatehouse', client_secret: clientSecret, redirect_uris: [redirectUri],
    grant_types: ['authorization_code'], response_types: ['code'],
  }, {
    // `gatehouse login`: a public client signing in from a terminal
    client_id: 'gatehouse-cli', token_endpoint_auth_method: 'none', redirect_uris: [],
    grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], response_types: [],
  }],
  claims: {openid: ['sub'], groups: ['groups']},
  scopes: ['openid', 'groups'],
  conformIdTokenClaims: false, // the groups go in the ID token itself
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({sub: id, groups: accounts[id] || []}),
  }),
  features: {devInteractions: {enabled: true}, deviceFlow: {enabled: true}},
  cookies: {keys: ['gatehouse-test-only']},
});
provider.listen(Number(port), '127.0.0.1', () => console.log('listening'));
