// A TCP proxy that holds new connections while its backend is down.
//
// It stands for what production deployments put in front of a server (a load balancer,
// or the gateway of Rivet's own engine): when the perdure server restarts, a client
// connecting meanwhile is not refused but waits until the server listens again. The
// official client needs that to reconnect across a restart: it gives up on a connection
// after one failed reconnect attempt (see docs/rivetkit-client.md).

import { createServer, connect, type Server, type Socket } from "node:net";

export type HoldingProxy = { url: string; close(): Promise<void> };

const RETRY_MS = 50;

/** Start a proxy on a free loopback port forwarding to 127.0.0.1:`backendPort`. */
export async function startHoldingProxy(backendPort: number, holdMs = 30_000): Promise<HoldingProxy> {
	const sockets = new Set<Socket>();
	const server: Server = createServer((client) => {
		sockets.add(client);
		client.on("close", () => sockets.delete(client));
		client.on("error", () => client.destroy());
		client.pause();
		const deadline = Date.now() + holdMs;
		const attempt = () => {
			if (client.destroyed) return;
			const backend = connect({ host: "127.0.0.1", port: backendPort });
			const retry = () => {
				backend.destroy();
				if (Date.now() > deadline) client.destroy();
				else setTimeout(attempt, RETRY_MS);
			};
			backend.once("error", retry);
			backend.once("connect", () => {
				backend.off("error", retry);
				sockets.add(backend);
				backend.on("close", () => {
					sockets.delete(backend);
					client.destroy();
				});
				backend.on("error", () => backend.destroy());
				client.on("close", () => backend.destroy());
				client.pipe(backend);
				backend.pipe(client);
				client.resume();
			});
		};
		attempt();
	});
	await new Promise<void>((resolve, reject) => {
		server.once("error", reject);
		server.listen(0, "127.0.0.1", () => resolve());
	});
	const address = server.address();
	if (address === null || typeof address === "string") throw new Error("proxy has no port");
	return {
		url: `http://127.0.0.1:${address.port}`,
		close: () =>
			new Promise<void>((resolve) => {
				for (const socket of sockets) socket.destroy();
				server.close(() => resolve());
			}),
	};
}
