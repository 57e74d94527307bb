package cond

import (
	"math"

	"github.com/expr-lang/expr/ast"

	"github.com/cepheus-cep/cepheus/event"
)

// earthRadiusKm is the mean Earth radius used by distance_km.
const earthRadiusKm = 6371.0088

// distanceKm compiles distance_km(lat1, lon1, lat2, lon2): the great-circle
// (haversine) distance in kilometres between two points given in degrees.
// Impossible-travel rules need it. A null or non-numeric argument is a
// run-time error (the condition is then false and counted).
func (c *compiler) distanceKm(n *ast.CallNode) (*compiledNode, error) {
	if len(n.Arguments) != 4 {
		return nil, c.errorf(n, "distance_km takes four numbers: lat1, lon1, lat2, lon2 (degrees)")
	}
	var leaves [4]leafNode
	operands := make([]*compiledNode, 4)
	for i, a := range n.Arguments {
		x, err := c.compileScalar(a)
		if err != nil {
			return nil, err
		}
		if !x.typ.numLike() && x.typ != tyNil {
			return nil, c.errorf(a, "invalid argument for distance_km (type %s): want a number of degrees", x.typ)
		}
		leaves[i] = x.leaf
		operands[i] = x
	}
	site := c.site(n)
	return c.scalar(n, tyFloat, func(fr frame) (event.Value, *Error) {
		var deg [4]float64
		for i := range leaves {
			v, err := leaves[i].get(fr)
			if err != nil {
				return event.Null, err
			}
			f, ok := v.AsFloat()
			if !ok {
				return event.Null, site.fail("invalid argument for distance_km (type %s)", v.Kind())
			}
			deg[i] = f
		}
		return event.Float(haversineKm(deg[0], deg[1], deg[2], deg[3])), nil
	}, operands...), nil
}

// haversineKm is the great-circle distance between two points in degrees.
func haversineKm(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) +
		math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(a)))
}
