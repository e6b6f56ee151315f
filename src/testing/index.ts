/**
 * onejob's testing helpers, for your own tests: a scriptable fake provider
 * speaking the OpenAI and Anthropic wire protocols, and its command line.
 *
 * @example
 * import { startFakeProvider } from 'onejob/testing';
 * const fake = await startFakeProvider();
 * fake.script([{ status: 503 }, { reply: 'ok' }]);
 */
export { startFakeProvider } from '../providers/fake/fake-provider-server.ts';
export type { FakeCall, FakeCallResult, FakeCallSource, FakeProvider, StartFakeProviderOptions } from '../providers/fake/fake-provider-server.ts';
export { FAKE_BEHAVIOUR_HEADER, parseFakeBehaviour, parseFakeRule, parseFakeScript } from '../providers/fake/fake-behaviour.ts';
export type { FakeBehaviour, FakeMatch, FakeProtocol, FakeResetPoint, FakeRule, FakeScript, FakeToolCall } from '../providers/fake/fake-behaviour.ts';
export { FAKE_PROVIDER_DEFAULT_PORT, runFakeProviderCli } from '../providers/fake/fake-provider-cli.ts';
export type { FakeProviderCliIo } from '../providers/fake/fake-provider-cli.ts';
