/** Kubernetes object names, as the apiserver checks them. */

/** An RFC 1123 label (namespaces, most names): at most 63 of [a-z0-9-], starting and ending alphanumeric. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** An RFC 1123 subdomain (ConfigMaps, Secrets, ...): at most 253 of [a-z0-9.-], starting and ending alphanumeric. */
export const DNS_SUBDOMAIN = /^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/;

/** A node's name: an RFC 1123 subdomain of dot-separated labels. */
export const NODE_NAME = /^(?=.{1,253}$)[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)*$/;
